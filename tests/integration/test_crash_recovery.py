"""Crash at each step of the lifecycle, recover, and the execution still ends succeeded or failed with a
reason: never stuck, never lost. Throttled calls go through botocore's retries without doubling an effect.

A crash is tests.faults.Crash raised by a botocore hook before or after one AWS call: the process "dies"
there. Recovery is what the running system does anyway: the hand clock moves one pre-load interval at a
time, a pre-load cycle (with its reconcile) runs under a new owner, and another worker processes every
message that is due.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from duetime.definitions import Settings
from duetime.domain.keys import shard_of
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec, to_ms
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload, reconcile_after
from duetime.service.jobs import submit_job
from duetime.worker.runtime import RunRecord, Worker

from tests.faults import Crash, Faults, during

LEASE = 3  # heartbeats every second, so a worker's heartbeat step is quick to reach
INTERVAL = 5


@pytest.fixture
def test_settings() -> Settings:
    return Settings(shards=4, preload_interval_seconds=INTERVAL, preload_window_seconds=30).with_lease_seconds(LEASE)


@pytest.fixture
def faults(ports) -> Faults:
    return Faults().attach_ports(ports)


class Notices:
    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.sent.append(detail)


@pytest.fixture
def notices(ports) -> Notices:
    ports.notifier = recorder = Notices()
    return recorder


@pytest.fixture
def runs() -> list[RunRecord]:
    return []


@pytest.fixture
def worker(ports, runs) -> Callable[[str], Worker]:
    return lambda worker_id: Worker(ports, "default", worker_id, concurrency=1, on_run=runs.append)


# The store writes a fault aims at, named by the port method that makes them (not by expression text).
CLAIM = during("claim")
HEARTBEAT = during("heartbeat")
FINISH = during("finish")
# A one-off job's finish is one TransactWriteItems: the run's end, its job's completion and the owner's counter.
FINISH_WRITE = "TransactWriteItems"
CURSOR = during("advance_cursor")


def submit(ports, at: str = "2026-12-01T09:00:05Z", **overrides: Any) -> Job:
    body: dict[str, Any] = {"name": "t", "handler": "demo.echo", "schedule": {"at": at}}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def only_job(ports) -> Job:
    [job] = list(ports.store.scan_jobs())
    return job


def history(ports, job_id: str) -> list[Execution]:
    return sorted(ports.store.executions_of_job(job_id, limit=100), key=lambda e: e.scheduled_at)


def received_now(ports, visibility: int = 30):
    return ports.queues.receive("default", 10, 0, visibility)


def recover(ports, clock, worker: Worker, done: Callable[[], bool], cycles: int = 20) -> int:
    """Run the system's own recovery until `done`: returns how many pre-load cycles it took."""
    for cycle in range(cycles):
        if done():
            return cycle
        clock.advance(INTERVAL)
        preload(ports, "recovery")
        # Visibility 0: what is not due yet stays visible for a later cycle (the clock here is by hand).
        for received in received_now(ports, visibility=0):
            if received.message.due_ms <= to_ms(clock.now):
                worker.process(received)
    assert done(), "the execution did not recover"
    return cycles


def ended(ports, job_id: str, count: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        found = history(ports, job_id)
        return len(found) >= count and all(e.status.is_terminal for e in found[:count])

    return check


# --- create ----------------------------------------------------------------------------------------


def test_a_crash_between_the_create_transaction_and_its_send_is_run_by_the_reconciler(ports, clock, faults, worker):
    # Given a job due in 5 s whose API process dies right after the job + execution transaction
    faults.crash_after("dynamodb", "TransactWriteItems")
    with pytest.raises(Crash):
        submit(ports)
    assert received_now(ports) == []
    job = only_job(ports)
    # When the system recovers, Then the execution is found and run once
    cycles = recover(ports, clock, worker("w2"), ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 1
    assert cycles * INTERVAL <= 35  # within the reconciler's grace plus a cycle


# --- pre-load send ---------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_preloader_dying_around_its_send_leaves_the_window_to_the_next_owner(
    ports, clock, faults, worker, runs, when
):
    # Given a job due at 09:10 and a pre-loader that dies at its SendMessageBatch
    job = submit(ports, at="2026-12-01T09:10:00Z")
    clock.advance(600 - 20)
    getattr(faults, f"crash_{when}")("sqs", "SendMessageBatch")
    with pytest.raises(Crash):
        preload(ports, "p1")
    # When another pre-loader takes the shard once p1's lease ends, from p1's unmoved cursor
    recover(ports, clock, worker("w1"), ended(ports, job.job_id))
    # Then the execution ran exactly once (a second send, if any, was dropped at claim)
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 1
    assert [r.attempt for r in runs] == [1]


def test_a_preloader_dying_before_it_moves_its_cursor_sends_again_harmlessly(ports, clock, faults, worker, runs):
    job = submit(ports, at="2026-12-01T09:10:00Z")
    clock.advance(600 - 20)
    shard = f"preload#{shard_of(job.job_id, ports.settings.shards):03d}"
    faults.crash_before("dynamodb", "UpdateItem", match=lambda p: CURSOR(p) and shard in str(p["Key"]))
    with pytest.raises(Crash):
        preload(ports, "p1")
    assert len(received_now(ports, visibility=0)) == 1
    recover(ports, clock, worker("w1"), ended(ports, job.job_id))
    assert history(ports, job.job_id)[0].status == ExecutionStatus.SUCCEEDED
    assert len(runs) == 1


# --- claim -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_worker_dying_at_its_claim_is_replaced_after_the_lease(ports, clock, faults, worker, when):
    job = submit(ports)
    clock.advance(5)
    [received] = received_now(ports)
    getattr(faults, f"crash_{when}")("dynamodb", "UpdateItem", match=CLAIM)
    with pytest.raises(Crash):
        worker("w1").process(received)
    # The dead worker's message is in flight: only the reconciler can bring the execution back
    recover(ports, clock, worker("w2"), ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED
    expected_workers = ["w1", "w2"] if when == "after" else ["w2"]
    assert [a.worker_id for a in execution.attempts] == expected_workers
    assert execution.attempts[-1].outcome == "succeeded"


# --- heartbeat -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "operation", "match"),
    [
        ("before", "UpdateItem", HEARTBEAT),  # the lease is not extended
        ("after", "UpdateItem", HEARTBEAT),  # the lease is extended, the message's visibility is not
        ("after", "ChangeMessageVisibility", None),  # both extended, then the worker dies
    ],
)
def test_a_worker_dying_mid_heartbeat_is_replaced_and_the_run_completes(
    ports, clock, faults, worker, runs, when, operation, match
):
    job = submit(ports, handler="demo.sleep", payload={"seconds": 1.5})
    clock.advance(5)
    [received] = received_now(ports)
    service = "sqs" if operation == "ChangeMessageVisibility" else "dynamodb"
    getattr(faults, f"crash_{when}")(service, operation, match=match)
    with pytest.raises(Crash):
        worker("w1").process(received)
    recover(ports, clock, worker("w2"), ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2
    assert [(r.worker_id, r.attempt) for r in runs] == [("w2", 2)]


# --- complete --------------------------------------------------------------------------------------


def test_a_worker_dying_after_recording_success_leaves_a_message_that_is_dropped(ports, clock, faults, worker, runs):
    job = submit(ports)
    clock.advance(5)
    [received] = received_now(ports)
    faults.crash_after("dynamodb", FINISH_WRITE, match=FINISH)
    with pytest.raises(Crash):
        worker("w1").process(received)
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED
    # The undeleted message comes back (here: sent again) and is dropped without a second run
    ports.queues.send([received.message], clock.now)
    recover(ports, clock, worker("w2"), lambda: ports.queues.receive("default", 10, 0, 0) == [], cycles=3)
    assert len(runs) == 1 and history(ports, job.job_id)[0].attempt == 1


def test_a_worker_dying_before_recording_its_outcome_is_run_again_after_the_lease(ports, clock, faults, worker):
    job = submit(ports)
    clock.advance(5)
    [received] = received_now(ports)
    faults.crash_before("dynamodb", FINISH_WRITE, match=FINISH)
    with pytest.raises(Crash):
        worker("w1").process(received)
    recover(ports, clock, worker("w2"), ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2


# --- retry move ------------------------------------------------------------------------------------


RETRY = {"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 2}


@pytest.mark.parametrize(
    ("when", "service", "operation"),
    [
        ("before", "sqs", "SendMessageBatch"),  # nothing of the retry happened
        ("after", "sqs", "SendMessageBatch"),  # the new message points where the row never moved
        ("after", "dynamodb", "TransactWriteItems"),  # moved and sent; the old message is left behind
    ],
)
def test_a_worker_dying_in_the_retry_move_still_retries_to_success(
    ports, clock, faults, worker, when, service, operation
):
    job = submit(ports, handler="demo.fail", payload={"times": 1}, retry=RETRY)
    clock.advance(5)
    [received] = received_now(ports)
    getattr(faults, f"crash_{when}")(service, operation)
    with pytest.raises(Crash):
        worker("w1").process(received)
    recover(ports, clock, worker("w2"), ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 2
    # Only a completed move recorded attempt 1's failure and re-keyed the row; otherwise attempt 1 looks
    # like a dead worker's and attempt 2 ran in the row where it was
    moved = service == "dynamodb"
    assert (ports.store.key_of(execution) != received.message.key) == moved
    assert execution.attempts[0].outcome == ("failed" if moved else None)


# --- cron next-run creation ------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_preloader_dying_at_the_next_cron_slot_leaves_no_gap_and_no_double(ports, clock, faults, worker, when):
    # Given an every-minute job (first slot 09:01) and a pre-loader dying as it creates slot 09:02
    job = submit(ports, schedule={"cron": "* * * * *", "timeZone": "UTC"})
    clock.advance(40)
    getattr(faults, f"crash_{when}")("dynamodb", "PutItem")
    with pytest.raises(Crash):
        preload(ports, "p1")
    # When the system recovers and runs on to 09:03
    recover(ports, clock, worker("w1"), ended(ports, job.job_id, count=3), cycles=40)
    # Then 09:01, 09:02 and 09:03 each ran once, and the chain goes on
    found = history(ports, job.job_id)
    slots = [e.scheduled_at for e in found]
    assert len(slots) == len(set(slots))
    assert [e.status for e in found[:3]] == [ExecutionStatus.SUCCEEDED] * 3
    start = clock.now.replace(hour=9, minute=1, second=0)
    assert slots[:3] == [start + timedelta(minutes=m) for m in range(3)]
    assert found[-1].status == ExecutionStatus.SCHEDULED


# --- dead-lettering --------------------------------------------------------------------------------


def exhausted(ports, clock) -> tuple[Job, Any]:
    job = submit(ports, handler="demo.fail", payload={"times": 5}, retry={"maxAttempts": 1})
    clock.advance(5)
    [received] = received_now(ports)
    return job, received


def test_a_worker_dying_after_recording_the_failure_leaves_it_failed_with_its_reason(
    ports, clock, faults, worker, notices
):
    job, received = exhausted(ports, clock)
    faults.crash_after("dynamodb", FINISH_WRITE, match=FINISH)
    with pytest.raises(Crash):
        worker("w1").process(received)
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.FAILED and "attempt 1" in (execution.error or "")
    ports.queues.send([received.message], clock.now)  # the undeleted message comes back: no second run
    recover(ports, clock, worker("w2"), lambda: ports.queues.receive("default", 10, 0, 0) == [], cycles=3)
    assert history(ports, job.job_id)[0].attempt == 1
    # And the notice the crash lost is sent again by the reconciler (the row stays open until the owner
    # is told), so the next drain tells the owner, once
    clock.advance(reconcile_after(ports).total_seconds() + INTERVAL)
    preload(ports, "recovery")
    assert drain_dead_letters(ports, "default") == 1
    assert [n["executionId"] for n in notices.sent] == [execution.execution_id]
    preload(ports, "recovery")
    assert drain_dead_letters(ports, "default") == 0 and len(notices.sent) == 1


def test_a_worker_dying_after_dead_lettering_tells_the_owner_once(ports, clock, faults, worker, notices):
    job, received = exhausted(ports, clock)
    faults.crash_after("sqs", "SendMessage")
    with pytest.raises(Crash):
        worker("w1").process(received)
    ports.queues.send([received.message], clock.now)
    recover(ports, clock, worker("w2"), lambda: ports.queues.receive("default", 10, 0, 0) == [], cycles=3)
    assert drain_dead_letters(ports, "default") == 1
    assert [n["executionId"] for n in notices.sent] == [history(ports, job.job_id)[0].execution_id]


def test_a_notifier_dying_after_failing_a_poison_message_still_tells_the_owner(ports, clock, faults, notices):
    # Given a due message that SQS redrove to the DLQ (received too often) for a still-waiting execution
    job = submit(ports)
    [received] = received_now(ports)
    dlq = ports.queues.dlq_urls["default"]
    # (visibility 0: what the dying notifier received is visible again at once, as it would be after 30 s)
    ports.queues.client.set_queue_attributes(QueueUrl=dlq, Attributes={"VisibilityTimeout": "0"})
    ports.queues.client.send_message(QueueUrl=dlq, MessageBody=received.message.to_body())
    # When the DLQ notifier dies right after ending the execution
    faults.crash_after("dynamodb", "UpdateItem")
    with pytest.raises(Crash):
        drain_dead_letters(ports, "default")
    # Then the execution is failed with its reason, and the reconciler's repeated notice tells the owner
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.FAILED and "poison" in (execution.skip_reason or execution.error or "")
    drain_dead_letters(ports, "default")
    clock.advance(reconcile_after(ports).total_seconds() + INTERVAL)
    preload(ports, "recovery")
    drain_dead_letters(ports, "default")
    assert [n["executionId"] for n in notices.sent] == [execution.execution_id]


# --- throttling ------------------------------------------------------------------------------------

HOT_PATH = [
    ("dynamodb", "TransactWriteItems"),
    ("sqs", "SendMessageBatch"),
    ("sqs", "ReceiveMessage"),
    ("dynamodb", "GetItem"),
    ("dynamodb", "UpdateItem"),
    ("sqs", "DeleteMessage"),
]


def queue_depth(ports) -> int:
    attrs = ports.queues.client.get_queue_attributes(
        QueueUrl=ports.queues.queue_urls["default"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attrs.values())


def test_the_hot_path_succeeds_through_throttling_without_doubling_anything(ports, clock, faults, worker, runs):
    # Given every hot-path call throttled once, the claim and the finish twice
    for service, operation in HOT_PATH:
        faults.throttle(service, operation, times=1)
    faults.throttle("dynamodb", "UpdateItem", times=2, match=CLAIM)
    faults.throttle("dynamodb", FINISH_WRITE, times=2, match=FINISH)
    # When a job is submitted, received and run
    job = submit(ports)
    assert queue_depth(ports) == 1  # one message, though its send was throttled
    clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    assert worker("w1").process(received) == "succeeded"
    # Then it ran once, in one attempt, and its message is gone
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.SUCCEEDED and execution.attempt == 1
    assert len(execution.attempts) == 1 and len(runs) == 1
    assert queue_depth(ports) == 0
    assert len(faults.fired) == len(HOT_PATH) + 4


def test_throttled_retry_and_dead_letter_writes_are_not_doubled(ports, clock, faults, worker, notices):
    # Given a job failing twice of two attempts, with its move and its DLQ notice throttled
    job = submit(ports, handler="demo.fail", payload={"times": 5}, retry={"maxAttempts": 2, **RETRY_DELAYS})
    faults.throttle("dynamodb", "TransactWriteItems", times=2)
    faults.throttle("sqs", "SendMessage", times=2)
    clock.advance(5)
    w1 = worker("w1")
    [first] = ports.queues.receive("default", 10, 0, 30)
    w1.process(first)
    recover(ports, clock, w1, ended(ports, job.job_id))
    [execution] = history(ports, job.job_id)
    assert execution.status == ExecutionStatus.FAILED and execution.attempt == 2
    assert [a.outcome for a in execution.attempts] == ["failed", "failed"]
    assert drain_dead_letters(ports, "default") == 1 and len(notices.sent) == 1


RETRY_DELAYS = {"baseDelaySeconds": 1, "maxDelaySeconds": 2}


def test_a_lost_send_response_sends_twice_and_the_execution_still_runs_once(ports, clock, faults, worker, runs):
    # Given SendMessageBatch whose answer is lost, so botocore sends it again
    faults.replay("sqs", "SendMessageBatch")
    job = submit(ports)
    assert queue_depth(ports) == 2
    # When both copies are processed, Then the second finds the execution ended and is dropped
    recover(ports, clock, worker("w1"), lambda: queue_depth(ports) == 0, cycles=3)
    assert len(runs) == 1 and history(ports, job.job_id)[0].attempt == 1


def test_a_lost_claim_response_still_gives_this_worker_its_claim(ports, clock, faults, worker, runs):
    # Given a claim whose answer is lost: botocore sends the same conditional write again
    job = submit(ports)
    clock.advance(5)
    [received] = received_now(ports)
    faults.replay("dynamodb", "UpdateItem", match=CLAIM)
    # Then the worker recognises its own claim and runs it at once, in attempt 1
    assert worker("w1").process(received) == "succeeded"
    [execution] = history(ports, job.job_id)
    assert execution.attempt == 1 and len(runs) == 1
