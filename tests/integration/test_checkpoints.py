"""Checkpoints through the worker on every backend: the next attempt resumes from the last one (its waiting
checkpoint flushed before the outcome), a handler fenced out is told at its next checkpoint, and the
heartbeat route records and refuses them as the store does."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.definitions import MAX_CHECKPOINT_BYTES
from duetime.domain.errors import StaleAttempt
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.service import executions as execution_cases
from duetime.service.jobs import submit_job
from duetime.service.outcomes import RunOutcome
from duetime.worker.registry import JobContext, handler
from duetime.worker.runtime import Worker

import tests.integration.checkpoint_handlers  # noqa: F401  (registers sample.count_in_child)
from tests.conftest import BOTH_BACKENDS
from tests.integration.succeeded import worker_loop
from tests.integration.test_api_contract import SECRET, Client, assert_error

pytestmark = BOTH_BACKENDS


def submit(ports, handler_name: str, payload: dict[str, Any], max_attempts: int = 3):
    spec = {
        "name": "count",
        "handler": handler_name,
        "payload": payload,
        "schedule": {"at": format_time(ports.clock())},
        "retry": {"maxAttempts": max_attempts, "baseDelaySeconds": 1, "maxDelaySeconds": 1},
    }
    return submit_job(ports, "alice", JobSpec.model_validate(spec))[0]


def run_next(ports, worker: Worker) -> RunOutcome:
    [received] = ports.queues.receive("default", 10, 0, 30)
    return worker.process(received)


@pytest.mark.parametrize("handler_name", ["demo.count", "sample.count_in_child"])
def test_a_retry_resumes_from_the_checkpoint_written_just_before_the_failure(ports, clock, handler_name):
    # Given a counter that checkpoints each count faster than checkpoints are written (one a second), and
    # whose attempt 1 fails right after its second count: that checkpoint is still waiting when it fails
    worker = Worker(ports, "default", "w1")
    worker.announcer.announce()  # the API accepts the handlers this worker serves
    job = submit(ports, handler_name, {"to": 4, "every": 0.01, "failAt": 2})
    assert run_next(ports, worker) == RunOutcome.FAILED
    [retrying] = ports.store.executions_of_job(job.job_id)
    # Then the waiting checkpoint was written before the outcome and moved with the retry
    assert retrying.status == ExecutionStatus.SCHEDULED and retrying.checkpoint is not None
    assert (retrying.checkpoint.state, retrying.checkpoint.attempt) == ({"count": 2}, 1)
    # And attempt 2 starts from it
    clock.advance(2)
    assert run_next(ports, worker) == RunOutcome.SUCCEEDED
    [done] = ports.store.executions_of_job(job.job_id)
    assert done.result == {"count": 4, "resumedFrom": 2, "attempt": 2}
    assert (done.checkpoint.state, done.checkpoint.attempt) == ({"count": 4}, 2)


def test_a_run_that_never_checkpoints_leaves_no_checkpoint(ports, clock):
    job = submit(ports, "demo.echo", {"a": 1})
    assert run_next(ports, Worker(ports, "default", "w1")) == RunOutcome.SUCCEEDED
    [done] = ports.store.executions_of_job(job.job_id)
    assert done.status == ExecutionStatus.SUCCEEDED and done.checkpoint is None


class Stolen:
    """What the fenced-out handler saw: set by the test once another worker took the row."""

    first_recorded = threading.Event()
    taken = threading.Event()
    refusals: list[BaseException] = []
    cancelled_after: list[bool] = []


@handler("tests.checkpoint_after_takeover", in_process=True)
def checkpoint_after_takeover(ctx: JobContext) -> Any:
    ctx.checkpoint({"step": 1})
    Stolen.first_recorded.set()
    Stolen.taken.wait(10)
    ctx.sleep(1.1)  # past the checkpoint interval: the next one is written at once, in this thread
    try:
        ctx.checkpoint({"step": 2})
    except StaleAttempt as exc:
        Stolen.refusals.append(exc)
        Stolen.cancelled_after.append(ctx.cancelled.is_set())
        raise
    return "not fenced"


def test_a_handler_fenced_out_is_refused_at_its_next_checkpoint_and_told_to_stop(ports, clock):
    Stolen.first_recorded.clear(), Stolen.taken.clear(), Stolen.refusals.clear(), Stolen.cancelled_after.clear()
    worker = Worker(ports, "default", "w1")
    worker.announcer.announce()
    job = submit(ports, "tests.checkpoint_after_takeover", {})
    [received] = ports.queues.receive("default", 10, 0, 30)
    ran: list[RunOutcome] = []
    runner = threading.Thread(target=lambda: ran.append(worker.process(received)))
    runner.start()
    assert Stolen.first_recorded.wait(10)
    # When w1's lease ends (its worker frozen, say) and w2 takes the row over
    key = ports.store.key_of(ports.store.executions_of_job(job.job_id)[0])
    taken = ports.store.claim(key, "w2", clock.advance(31), clock() + timedelta(seconds=30)).claimed
    assert taken.attempt == 2 and taken.checkpoint.state == {"step": 1}
    Stolen.taken.set()
    runner.join(15)
    # Then w1's next checkpoint raises StaleAttempt in its handler, which is told to stop, and reports nothing
    [refusal] = Stolen.refusals
    assert "no longer holds" in str(refusal) and Stolen.cancelled_after == [True]
    assert ran == [RunOutcome.STALE]
    row = ports.store.get_execution(key)
    assert (row.status, row.attempt, row.worker_id) == (ExecutionStatus.RUNNING, 2, "w2")
    assert (row.checkpoint.state, row.checkpoint.attempt) == ({"step": 1}, 1)


class Handover:
    """The run a shutting-down worker hands over: it has a checkpoint waiting when the worker stops."""

    waiting = threading.Event()


@handler("tests.checkpoint_then_hand_over", in_process=True)
def checkpoint_then_hand_over(ctx: JobContext) -> Any:
    ctx.checkpoint({"n": 1})  # written at once
    ctx.checkpoint({"n": 2})  # within the interval: waits for the next heartbeat
    Handover.waiting.set()
    ctx.cancelled.wait(10)  # runs until the worker hands it over
    return "handed over"


def test_a_worker_shutting_down_writes_the_waiting_checkpoint_before_it_hands_the_run_over(ports, clock):
    Handover.waiting.clear()
    worker = Worker(ports, "default", "w1", concurrency=1)
    worker.announcer.announce()
    job = submit(ports, "tests.checkpoint_then_hand_over", {})
    with worker_loop(worker, grace_seconds=0.2):
        assert Handover.waiting.wait(15)
    # The run was released (its lease ends now, for the next worker) with the newest checkpoint on the row
    [row] = ports.store.executions_of_job(job.job_id)
    assert (row.status, row.attempt, row.lease_until) == (ExecutionStatus.RUNNING, 1, clock())
    assert (row.checkpoint.state, row.checkpoint.attempt) == ({"n": 2}, 1)
    taken = ports.store.claim(ports.store.key_of(row), "w2", clock(), clock() + timedelta(seconds=30)).claimed
    assert taken.attempt == 2 and taken.checkpoint.state == {"n": 2}


# --- over HTTP: the heartbeat route and GET /executions/{id} ---------------------------------------------


@pytest.fixture
def app(ports):
    return build_app(ports, local_secret=SECRET)


def test_the_heartbeat_route_records_a_checkpoint_and_refuses_a_stale_or_oversized_one(ports, clock, app):
    alice = Client(app, issue_token(SECRET, "alice"))
    bob = Client(app, issue_token(SECRET, "bob"))
    worker = Client(app, issue_token(SECRET, "w", worker=True))
    job = submit(ports, "demo.count", {})
    [received] = ports.queues.receive("default", 10, 0, 30)
    first = execution_cases.claim_execution(ports, received.message, "w1").execution
    path = f"/executions/{first.execution_id}"
    holder = {"attempt": 1, "workerId": "w1", "claimToken": first.claim_token}
    # The holder's heartbeat with a checkpoint renews the lease and records it
    status, beat = worker.call("POST", f"{path}/heartbeat", {**holder, "checkpoint": {"count": 3}})
    assert status == 200, beat
    status, shown = alice.call("GET", path)
    assert status == 200 and shown["checkpoint"]["state"] == {"count": 3}
    assert shown["checkpoint"]["attempt"] == 1 and shown["leaseUntil"] == beat["leaseUntil"]
    assert "claimToken" not in shown
    # Another owner does not see it
    status, body = bob.call("GET", path)
    assert_error((status, body), 404, "executionId")
    # A checkpoint too large is 400 naming it, and changes nothing
    big = {**holder, "checkpoint": "x" * MAX_CHECKPOINT_BYTES}
    status, body = worker.call("POST", f"{path}/heartbeat", big)
    assert_error((status, body), 400, "checkpoint")
    # When attempt 2 takes over, attempt 1's late checkpoint is 409 and changes nothing
    second = ports.store.claim(
        ports.store.key_of(first), "w2", clock.advance(31), clock() + timedelta(seconds=30)
    ).claimed
    status, body = worker.call("POST", f"{path}/heartbeat", {**holder, "checkpoint": {"count": 99}})
    assert_error((status, body), 409, "attempt")
    status, shown = alice.call("GET", path)
    assert shown["attempt"] == 2 and shown["checkpoint"]["state"] == {"count": 3}
    # A heartbeat without one leaves it as it is
    current = {"attempt": 2, "workerId": "w2", "claimToken": second.claim_token}
    status, _ = worker.call("POST", f"{path}/heartbeat", current)
    assert status == 200
    assert ports.store.get_execution(ports.store.key_of(first)).checkpoint.state == {"count": 3}
    # And null is a checkpoint too (a handler that starts over), not the absence of one
    status, _ = worker.call("POST", f"{path}/heartbeat", {**current, "checkpoint": None})
    assert status == 200
    cleared = ports.store.get_execution(ports.store.key_of(first)).checkpoint
    assert (cleared.state, cleared.attempt) == (None, 2)
    assert job.job_id in path


def test_checkpoints_given_faster_than_once_a_second_cost_two_writes_on_dynamodb(ports, clock, backend):
    if backend != "moto":
        pytest.skip("counts DynamoDB calls")
    written: list[str] = []

    def count(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "UpdateItem" and "#cp" in params.get("UpdateExpression", ""):
            written.append(params["UpdateExpression"])

    ports.store.client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", count)
    # Given 40 counts, each checkpointed, within well under a second
    job = submit(ports, "demo.count", {"to": 40, "every": 0.001})
    started = time.monotonic()
    assert run_next(ports, Worker(ports, "default", "w1")) == RunOutcome.SUCCEEDED
    elapsed = time.monotonic() - started
    # Then the first was written at once and the last before the outcome (and, on a machine so loaded that
    # the run took seconds, at most one more a second): the newest state kept
    assert 2 <= len(written) <= 2 + int(elapsed)
    [done] = ports.store.executions_of_job(job.job_id)
    assert done.checkpoint.state == {"count": 40} and done.result["count"] == 40
