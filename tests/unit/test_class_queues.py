"""A job class spread over several due queues by shard: naming, routing `shard % queues`, receipts that name
their queue, and the settings' checks (runtime environment, `duetime local --class-queues`)."""

from __future__ import annotations

import pytest
from duetime.cli.main import parser
from duetime.config import RuntimeConfig, runtime_environment
from duetime.definitions import JOB_CLASSES, MAX_CLASS_QUEUES, Settings, parse_class_queues
from duetime.domain.keys import ExecutionKey, due_partition
from duetime.service.ports import queue_receipt, split_receipt
from pydantic import ValidationError

from tests.conftest import Clock


def test_queue_zero_keeps_the_one_queue_name_and_the_others_are_numbered():
    spread = Settings().with_class_queues({"default": 3}).job_class("default")
    assert spread.queue_name("p") == "p-due-default" == JOB_CLASSES["default"].queue_name("p")
    assert spread.queue_names("p") == ["p-due-default", "p-due-default-1", "p-due-default-2"]
    assert spread.dlq_name("p") == "p-dlq-default"  # one DLQ for all of them
    assert JOB_CLASSES["long"].queue_names("p") == ["p-due-long"]


def test_a_message_goes_to_the_queue_of_its_shard_modulo_the_queues():
    spread = Settings().with_class_queues({"default": 3}).job_class("default")
    at = Clock()()
    for shard in range(12):
        key = ExecutionKey(pk=due_partition(at, shard), sk="x")
        assert key.shard == shard
        assert spread.queue_of_shard(key.shard) == shard % 3
    assert JOB_CLASSES["default"].queue_of_shard(7) == 0


def test_a_receipt_names_its_queue_and_queue_zero_s_is_the_handle_itself():
    handle = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a+/="  # an SQS handle: base64, never a '#'
    assert queue_receipt(0, handle) == handle and split_receipt(handle) == (0, handle)
    assert split_receipt(queue_receipt(7, handle)) == (7, handle)
    assert split_receipt(queue_receipt(1, "12.ab34")) == (1, "12.ab34")  # a SQLite receipt


def test_settings_refuse_unknown_classes_and_counts_out_of_range():
    with pytest.raises(ValueError, match="unknown job class 'nightly'"):
        Settings().with_class_queues({"nightly": 2})
    for bad in (0, MAX_CLASS_QUEUES + 1):
        with pytest.raises(ValueError, match=rf"queues of job class 'default' must be 1\.\.{MAX_CLASS_QUEUES}"):
            Settings().with_class_queues({"default": bad})
    assert Settings().class_queues() == {}
    assert Settings().with_class_queues({"default": 4, "long": 1}).class_queues() == {"default": 4}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("default", "'default' is not CLASS=COUNT"),
        ("default=x", "'default=x' is not CLASS=COUNT"),
        ("default=-1", r"must be 1\.\.10, got -1"),
        ("default=2,default=3", "given twice"),
        ("other=2", "unknown job class 'other'"),
    ],
)
def test_parse_class_queues_says_what_is_wrong(raw, problem):
    with pytest.raises(ValueError, match=problem):
        parse_class_queues(raw, "=", JOB_CLASSES)


def test_parse_class_queues_reads_every_entry():
    assert parse_class_queues(" default=2 , long=3 ,", "=", JOB_CLASSES) == {"default": 2, "long": 3}
    assert parse_class_queues("default:4", ":", JOB_CLASSES) == {"default": 4}
    assert parse_class_queues("", ":", JOB_CLASSES) == {}


def test_duetime_local_takes_class_queues_and_refuses_bad_ones(capsys):
    assert parser().parse_args(["local", "--class-queues", "default=2"]).class_queues == {"default": 2}
    assert parser().parse_args(["local"]).class_queues == {}
    with pytest.raises(SystemExit):
        parser().parse_args(["local", "--class-queues", "default=11"])
    assert "argument --class-queues: the queues of job class 'default' must be 1..10" in capsys.readouterr().err


def test_the_environment_carries_the_spread_and_every_queue_url():
    settings = Settings(prefix="p").with_class_queues({"default": 2})
    urls = {"default": ["https://sqs/p-due-default", "https://sqs/p-due-default-1"], "long": "https://sqs/p-due-long"}
    env = runtime_environment(settings, "eu-west-1", urls, {"default": "d", "long": "l"})
    assert env["DUETIME_CLASS_QUEUES"] == '{"default":2}'
    config = RuntimeConfig.from_env(env)
    assert config.queue_urls == urls
    assert config.settings().job_class("default").queues == 2 and config.settings().job_class("long").queues == 1
    # A stack without spread classes writes no such variable: its functions' environment is what it was.
    plain = runtime_environment(Settings(prefix="p"), "eu-west-1", {"default": "q", "long": "l"}, {})
    assert "DUETIME_CLASS_QUEUES" not in plain


def test_the_environment_is_refused_at_cold_start_when_counts_and_urls_disagree():
    with pytest.raises(ValidationError, match="DUETIME_CLASS_QUEUES: the queues of job class 'default' must be"):
        RuntimeConfig.from_env({"DUETIME_CLASS_QUEUES": '{"default":11}'})
    with pytest.raises(ValidationError, match="DUETIME_QUEUE_URLS gives 1 queue"):
        RuntimeConfig.from_env({"DUETIME_CLASS_QUEUES": '{"default":2}', "DUETIME_QUEUE_URLS": '{"default":"q"}'})
    with pytest.raises(ValidationError, match="DUETIME_QUEUE_URLS gives 2 queue"):
        RuntimeConfig.from_env({"DUETIME_QUEUE_URLS": '{"default":["a","b"]}'})


def test_duetime_local_answers_the_api_in_two_processes_where_two_cores_are_there_else_one(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert parser().parse_args(["local"]).api_processes == 2
    assert parser().parse_args(["local", "--api-processes", "1"]).api_processes == 1
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert parser().parse_args(["local"]).api_processes == 1
    monkeypatch.setattr("os.cpu_count", lambda: None)  # unknown: one
    assert parser().parse_args(["local"]).api_processes == 1
