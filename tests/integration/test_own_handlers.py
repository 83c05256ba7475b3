"""Python handlers of a team, run by the real worker against moto: which names a job may use (announced
by workers), grants at submission and again at claim, results that must fit, errors that are cut to
size, and timeouts that kill the child process running the handler."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.config import RuntimeConfig
from duetime.definitions import HANDLER_ANNOUNCE_TTL_SECONDS, MAX_ERROR_BYTES
from duetime.domain.errors import Forbidden, InvalidInput
from duetime.domain.grants import Grants
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec, format_time
from duetime.local.http_bridge import to_event
from duetime.service.handlers import announce_handlers, withdraw_handlers
from duetime.service.jobs import submit_job
from duetime.worker.isolation import ORPHANED_EXIT, child_command
from duetime.worker.registry import registered_names
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS
from tests.integration import sample_handlers


def spec(clock, handler: str, **overrides: Any) -> JobSpec:
    body: dict[str, Any] = {
        "name": "t",
        "handler": handler,
        "schedule": {"at": format_time(clock.now + timedelta(seconds=1))},
    }
    body.update(overrides)
    return JobSpec.model_validate(body)


def run_due(ports, clock, worker: Worker, seconds: float = 1) -> list[str]:
    """Process every message due now (the clock moves by hand, `seconds` at a time)."""
    clock.advance(seconds)
    return [worker.process(r) for r in ports.queues.receive("default", 10, 0, 30)]


def history(ports, job: Job) -> list[Execution]:
    return sorted(ports.store.executions_of_job(job.job_id, limit=100), key=lambda e: e.scheduled_at)


def runs(folder: Path) -> list[str]:
    path = folder / "runs"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def announced(ports) -> list[str]:
    """The sample handlers, announced for `default` as a worker that loaded their module does."""
    assert sample_handlers.counted  # imported: its @handlers are registered in this process
    served = [n for n in registered_names() if n.startswith("sample.")]
    announce_handlers(ports, "default", "w-samples", served)
    return served


# --- which names a job may use ------------------------------------------------------------------


@BOTH_BACKENDS
def test_a_python_name_no_worker_serves_is_refused_listing_what_is_served(ports, clock):
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))
    assert refused.value.field == "handler"
    assert "not served" in refused.value.message and "demo.echo" in refused.value.message


@BOTH_BACKENDS
def test_a_name_is_accepted_while_a_worker_announces_it_and_refused_after_it_stopped(ports, clock):
    announce_handlers(ports, "default", "w1", ["billing.generate_invoices", "demo.echo"])
    job, created = submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))
    assert created and job.handler == "billing.generate_invoices"
    # Another class's workers do not serve it.
    with pytest.raises(InvalidInput, match="jobClass 'long'"):
        submit_job(ports, "alice", spec(clock, "billing.generate_invoices", jobClass="long"))
    # An announcement not renewed is forgotten; a withdrawn one at once.
    clock.advance(HANDLER_ANNOUNCE_TTL_SECONDS + 1)
    with pytest.raises(InvalidInput, match=r"billing\.generate_invoices"):
        submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))
    announce_handlers(ports, "default", "w2", ["billing.generate_invoices"])
    submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))
    withdraw_handlers(ports, "default", "w2")
    with pytest.raises(InvalidInput):
        submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))


@BOTH_BACKENDS
def test_expired_announcements_are_pruned_from_the_record(ports, clock):
    announce_handlers(ports, "default", "old", ["a.one"])
    clock.advance(HANDLER_ANNOUNCE_TTL_SECONDS + 1)
    announce_handlers(ports, "default", "new", ["a.two"])
    record = ports.store.get_control("handlers#default")
    assert record is not None and "worker:old" not in record and "worker:new" in record


@BOTH_BACKENDS
def test_the_deployment_manifest_and_kind_targets_need_no_announcement(ports, clock):
    ports.handler_manifest = {"default": frozenset({"billing.generate_invoices"})}
    submit_job(ports, "alice", spec(clock, "billing.generate_invoices"))
    for target in ("lambda:billing-fn", "ecs:report", "https://hooks.example.com/run"):
        submit_job(ports, "alice", spec(clock, target))


# --- grants -------------------------------------------------------------------------------------------


GRANTS = Grants.parse(
    [
        {"owners": ["*"], "handlers": ["demo.*"]},
        {"owners": ["alice", "group:billing"], "handlers": ["sample.*", "lambda:billing-*"]},
    ]
)


@BOTH_BACKENDS
def test_an_owner_without_a_grant_is_forbidden_naming_the_handler(ports, clock, announced):
    ports.grants = GRANTS
    with pytest.raises(Forbidden) as forbidden:
        submit_job(ports, "bob", spec(clock, "sample.counted"))
    assert forbidden.value.field == "handler" and "'bob'" in forbidden.value.message
    with pytest.raises(Forbidden):
        submit_job(ports, "bob", spec(clock, "lambda:billing-run"))
    submit_job(ports, "bob", spec(clock, "demo.echo"))
    submit_job(ports, "alice", spec(clock, "sample.counted"))
    submit_job(ports, "carol", spec(clock, "lambda:billing-run"), groups=["billing"])


@BOTH_BACKENDS
def test_a_grant_withdrawn_after_submission_ends_the_run_failed_at_claim_without_running(
    ports, clock, announced, tmp_path
):
    ports.grants = GRANTS
    job, _ = submit_job(
        ports, "carol", spec(clock, "sample.counted", payload={"dir": str(tmp_path)}), groups=["billing"]
    )
    ports.grants = Grants.parse([{"owners": ["alice"], "handlers": ["sample.*"]}])  # billing's grant withdrawn
    assert run_due(ports, clock, Worker(ports, "default", "w1", concurrency=1)) == ["failed"]
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 1
    assert execution.error == "owner 'carol' is not granted handler 'sample.counted'"
    assert runs(tmp_path) == []


@BOTH_BACKENDS
def test_the_groups_a_job_was_submitted_with_are_kept_for_the_check_at_claim(ports, clock, announced, tmp_path):
    ports.grants = GRANTS
    job, _ = submit_job(
        ports, "carol", spec(clock, "sample.counted", payload={"dir": str(tmp_path)}), groups=["billing"]
    )
    assert ports.store.get_job(job.job_id).owner_groups == ["billing"]
    assert run_due(ports, clock, Worker(ports, "default", "w1", concurrency=1)) == ["succeeded"]
    assert len(runs(tmp_path)) == 1


# --- a handler that disappeared -------------------------------------------------------------------------


@BOTH_BACKENDS
def test_a_handler_no_longer_served_ends_failed_permanently_once(ports, clock):
    announce_handlers(ports, "default", "w-old", ["billing.gone"])
    job, _ = submit_job(ports, "alice", spec(clock, "billing.gone", retry={"maxAttempts": 5}))
    withdraw_handlers(ports, "default", "w-old")  # the worker that had the module went away
    assert run_due(ports, clock, Worker(ports, "default", "w1", concurrency=1)) == ["failed"]
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 1
    assert execution.error == "handler 'billing.gone' is not served by this worker"


@BOTH_BACKENDS
def test_a_worker_without_the_handler_passes_the_run_to_a_live_worker_that_announces_it(ports, clock):
    announce_handlers(ports, "default", "w-billing", ["billing.elsewhere"])
    job, _ = submit_job(ports, "alice", spec(clock, "billing.elsewhere"))
    assert run_due(ports, clock, Worker(ports, "default", "w-plain", concurrency=1)) == ["passed"]
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.SCHEDULED and execution.attempt == 0


# --- results and errors that fit ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("handler", "reason"),
    [
        ("sample.returns_datetime", "is not JSON"),
        ("sample.returns_datetime_in_process", "is not JSON"),
        ("sample.returns_megabyte", "bytes as JSON; at most 131072 are stored"),
    ],
)
@BOTH_BACKENDS
def test_a_result_that_cannot_be_stored_fails_the_run_once_with_the_reason(
    ports, clock, announced, tmp_path, handler, reason
):
    job, _ = submit_job(ports, "alice", spec(clock, handler, payload={"dir": str(tmp_path)}, retry={"maxAttempts": 3}))
    assert run_due(ports, clock, Worker(ports, "default", "w1", concurrency=1)) == ["failed"]
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 1
    assert reason in (execution.error or "") and execution.result is None
    assert run_due(ports, clock, Worker(ports, "default", "w2", concurrency=1)) == []
    assert len(runs(tmp_path)) == 1


@BOTH_BACKENDS
def test_error_text_is_cut_to_the_limit_on_retries_and_at_the_end(ports, clock, announced, tmp_path):
    job, _ = submit_job(
        ports,
        "alice",
        spec(
            clock, "sample.long_error", payload={"dir": str(tmp_path)}, retry={"maxAttempts": 2, "baseDelaySeconds": 1}
        ),
    )
    worker = Worker(ports, "default", "w1", concurrency=1)
    assert run_due(ports, clock, worker) == ["failed"]  # retried
    assert run_due(ports, clock, worker, seconds=2) == ["failed"]  # for good (the retry waited 2 s)
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 2
    errors = [execution.error or ""] + [a.error or "" for a in execution.attempts]
    assert all(e.startswith("RuntimeError: éé") and e.endswith("[truncated]") for e in errors)
    assert all(len(e.encode()) <= MAX_ERROR_BYTES for e in errors)


@BOTH_BACKENDS
def test_a_child_process_handler_gets_the_owner_and_its_prints_do_not_spoil_the_result(ports, clock, announced):
    job, _ = submit_job(
        ports, "alice", spec(clock, "sample.prints_and_returns_owner", payload={"parentPid": os.getpid()})
    )
    assert run_due(ports, clock, Worker(ports, "default", "w1", concurrency=1)) == ["succeeded"]
    [execution] = history(ports, job)
    assert execution.result == {"owner": "alice", "executionId": execution.execution_id, "inChild": True}


# --- timeouts that stop the work --------------------------------------------------------------------------


@BOTH_BACKENDS
def test_a_handler_past_its_timeout_is_killed_and_the_next_attempt_runs_alone(ports, clock, announced, tmp_path):
    job, _ = submit_job(
        ports,
        "alice",
        spec(
            clock,
            "sample.sleep_then_write",
            payload={"dir": str(tmp_path), "seconds": 3},
            timeoutSeconds=1,
            retry={"maxAttempts": 2, "baseDelaySeconds": 1},
        ),
    )
    worker = Worker(ports, "default", "w1", concurrency=1)
    assert run_due(ports, clock, worker) == ["failed"]
    [first] = runs(tmp_path)
    first_pid = int(first.split()[1])
    with pytest.raises(ProcessLookupError):  # the first attempt's process is gone before the next starts
        os.kill(first_pid, 0)
    assert run_due(ports, clock, worker, seconds=2) == ["succeeded"]
    time.sleep(3)  # longer than the first attempt would have slept
    assert not (tmp_path / "written-after-sleep").exists()
    [execution] = history(ports, job)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2
    assert execution.attempts[0].error == "timeout after 1 s"
    assert [line.split()[0] for line in runs(tmp_path)] == ["1", "2"]


def test_a_worker_runs_no_more_handler_children_at_once_than_it_is_allowed(ports, clock, announced, tmp_path):
    # Given six runs due at once of a handler that runs in a child process, and a worker that takes all six at
    # once but may start two children at a time (as the worker function, whose batch may be 100 runs, does)
    for _ in range(6):
        submit_job(
            ports, "alice", spec(clock, "sample.sleep_recording_span", payload={"dir": str(tmp_path), "seconds": 1})
        )
    worker = Worker(ports, "default", "w1", concurrency=6, children_at_once=2)
    clock.advance(1)
    received = ports.queues.receive("default", 10, 0, 30)
    assert len(received) == 6
    # When it runs them, each in a thread of its own
    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(worker.process, received))
    # Then all succeed, and no more than two children ran at any moment
    assert outcomes == ["succeeded"] * 6
    spans = [tuple(map(float, line.split())) for line in (tmp_path / "spans").read_text().splitlines()]
    assert len(spans) == 6
    assert max(sum(start <= at < end for start, end in spans) for at, _ in spans) <= 2


# --- the API on AWS: grants and the manifest from the environment, groups from Cognito claims ----------------


def cognito_call(app, owner: str, groups: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /jobs as API Gateway's Cognito authorizer passes it on: verified claims, no token to check."""
    event = to_event("POST", "/jobs", {}, json.dumps(body).encode())
    event["requestContext"]["authorizer"] = {"claims": {"sub": owner, "cognito:groups": groups}}
    response = app.resolve(event, None)
    return response["statusCode"], json.loads(response["body"])


@BOTH_BACKENDS
def test_the_deployed_api_reads_grants_and_the_manifest_from_its_environment(ports, clock):
    env = {
        "DUETIME_HANDLER_GRANTS": json.dumps([{"owners": ["group:billing"], "handlers": ["billing.*"]}]),
        "DUETIME_HANDLER_MANIFEST": json.dumps({"default": ["billing.generate_invoices"]}),
    }
    config = RuntimeConfig.from_env(env)
    ports.grants, ports.handler_manifest = config.grants(), config.manifest()
    app = build_app(ports, local_secret=None)
    body = spec(clock, "billing.generate_invoices").model_dump(mode="json", by_alias=True, exclude_unset=True)
    status, created = cognito_call(app, "carol", "billing,ops", body)
    assert status == 201, created
    status, refused = cognito_call(app, "bob", "ops", body)
    assert status == 403 and refused["error"]["field"] == "handler" and refused["error"]["code"] == "forbidden"


@BOTH_BACKENDS
def test_without_configured_grants_the_deployed_api_allows_the_demo_handlers_only(ports, clock):
    ports.grants = RuntimeConfig().grants()
    app = build_app(ports, local_secret=None)
    demo = spec(clock, "demo.echo").model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert cognito_call(app, "carol", "", demo)[0] == 201
    for target in ("lambda:billing-fn", "ecs:report"):
        body = {**demo, "handler": target}
        assert cognito_call(app, "carol", "", body)[0] == 403


def test_a_child_whose_worker_is_gone_exits_without_finishing_the_handler(tmp_path):
    request = {
        "module": sample_handlers.__name__,
        "handler": "sample.sleep_then_write",
        "context": {
            "executionId": "j_1.1796169600000",
            "jobId": "j_1",
            "attempt": 1,
            "scheduledAt": "2026-12-01T09:00:00+00:00",
            "payload": {"dir": str(tmp_path), "seconds": 2},
            "owner": "alice",
        },
    }
    child = subprocess.Popen(child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.write(json.dumps(request).encode() + b"\n")
    child.stdin.close()  # what the worker's death does to the pipe
    assert child.wait(timeout=30) == ORPHANED_EXIT
    time.sleep(3)  # longer than the handler would have slept
    assert not (tmp_path / "written-after-sleep").exists()


def test_a_child_imports_the_handler_module_from_where_the_worker_imported_it(tmp_path, monkeypatch):
    """The local Lambda emulation imports a worker's handlers from its handler layer, a folder not on this
    process's path: the child is given that folder first, so it runs the code the worker registered."""
    package = f"layered_{os.getpid()}_{time.monotonic_ns()}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "handlers.py").write_text("")
    with monkeypatch.context() as during_import:
        during_import.syspath_prepend(str(tmp_path))
        importlib.import_module(f"{package}.handlers")
    assert str(tmp_path) not in sys.path
    for module in (f"{package}.handlers", package):
        assert json.loads(child_command(module)[3])[0] == str(tmp_path)
    assert json.loads(child_command(sample_handlers.__name__)[3]) == sys.path  # already on the path: as it is
