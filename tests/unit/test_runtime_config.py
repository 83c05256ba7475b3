"""RuntimeConfig is the one contract between the stack's environment and the code: what to_env writes, from_env
reads back; limits the API and the worker apply are the same ones."""

from __future__ import annotations

import itertools
import re
import time

import pytest
from duetime.api.models import CompleteRequest
from duetime.config import RuntimeConfig, function_environment, runtime_environment
from duetime.definitions import DEFAULT_JOB_CLASS, MAX_RESULT_BYTES, Settings
from duetime.domain.keys import JOB_ID_PATTERN, new_job_id, time_ordered_hex
from pydantic import ValidationError


def full_config() -> RuntimeConfig:
    return RuntimeConfig(
        prefix="team",
        region="eu-west-1",
        shards=8,
        preload_interval_seconds=30,
        preload_window_seconds=120,
        lease_seconds=45,
        queue_urls={"default": "https://sqs/q-default", "long": "https://sqs/q-long"},
        dlq_urls={"default": "https://sqs/d-default"},
        alert_topic_arn="arn:aws:sns:eu-west-1:1:alerts",
        ecs_cluster="workers",
        ecs_subnets="subnet-a,subnet-b",
        handler_grants=[{"owners": ["alice"], "handlers": ["billing.*"]}],
        handler_manifest={"default": ["billing.invoice"]},
        job_class="long",
        handler_modules="billing.handlers,billing.more",
    )


def test_what_to_env_writes_from_env_reads_back():
    config = full_config()
    env = config.to_env()
    assert env["DUETIME_SHARDS"] == "8" and env["DUETIME_JOB_CLASS"] == "long"
    assert RuntimeConfig.from_env(env) == config
    assert RuntimeConfig.from_env(env).handler_module_names() == ["billing.handlers", "billing.more"]


def test_construction_holds_only_its_arguments_and_from_env_reads_the_process(monkeypatch):
    monkeypatch.setenv("DUETIME_SHARDS", "7")
    monkeypatch.setenv("DUETIME_QUEUE_URLS", '{"default": "https://sqs/q"}')
    assert RuntimeConfig().shards == Settings().shards
    from_process = RuntimeConfig.from_env()
    assert from_process.shards == 7 and from_process.queue_urls == {"default": "https://sqs/q"}
    # Only what was given is written: the defaults stay where they are stated.
    assert RuntimeConfig(shards=7).to_env() == {"DUETIME_SHARDS": "7"}


def test_defaults_are_the_shared_settings():
    config, settings = RuntimeConfig(), Settings()
    assert config.settings() == settings
    assert config.job_class == DEFAULT_JOB_CLASS


def test_a_bad_value_in_the_environment_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="preload_window_seconds"):
        RuntimeConfig.from_env({"DUETIME_PRELOAD_WINDOW_SECONDS": "900"})
    with pytest.raises(KeyError):
        RuntimeConfig.env_name("no_such_setting")


def test_the_stack_environment_is_the_config_written_out():
    shared = runtime_environment(Settings(prefix="p"), "us-east-1", {"default": "q"}, {"default": "d"}, 40)
    env = function_environment("worker", shared, job_class="default", handler_modules="m")
    config = RuntimeConfig.from_env(env)
    assert (config.prefix, config.lease_seconds, config.queue_urls) == ("p", 40, {"default": "q"})
    assert (config.job_class, config.handler_modules) == ("default", "m")
    assert env["POWERTOOLS_SERVICE_NAME"] == "worker"


def test_the_api_takes_a_result_on_the_terms_a_worker_stores_it():
    def complete(**values):
        return CompleteRequest(attempt=1, workerId="w", claimToken="t", result="succeeded", **values)

    complete(output="x" * (MAX_RESULT_BYTES - 2))  # the quotes make it exactly the limit
    with pytest.raises(ValidationError, match=f"{MAX_RESULT_BYTES + 1} bytes"):
        complete(output="x" * (MAX_RESULT_BYTES - 1))
    with pytest.raises(ValidationError, match="not JSON"):
        complete(output=float("nan"))
    # A long error is taken and cut to MAX_ERROR_BYTES when stored, as a worker's own errors are.
    assert complete(error="e" * 10_000).error == "e" * 10_000


def test_a_new_job_id_has_the_shape_the_api_accepts():
    assert re.fullmatch(JOB_ID_PATTERN, new_job_id("0123456789abcdef"))
    assert re.fullmatch(JOB_ID_PATTERN, new_job_id(time_ordered_hex()))
    assert not re.fullmatch(JOB_ID_PATTERN, "j_XYZ")


def test_job_ids_made_later_sort_later_and_keep_64_random_bits():
    made = []
    for _ in range(3):
        made.append([new_job_id(time_ordered_hex()) for _ in range(50)])
        time.sleep(0.002)  # the next round is at least a millisecond later
    for earlier, later in itertools.pairwise(made):
        assert max(earlier) < min(later)
    ids = [i for round_ in made for i in round_]
    assert len(set(ids)) == len(ids)
    assert len({i[-16:] for i in ids}) == len(ids)  # the random part differs within a millisecond too
    assert abs(int(ids[0][2:14], 16) - time.time() * 1000) < 60_000
