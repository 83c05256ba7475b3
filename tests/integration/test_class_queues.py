"""A job class spread over two due queues by shard, on every backend: what is sent goes to queue
`shard % 2`, every receiver reads both, deletes and visibility changes reach the queue a message came
from, and retries and a DLQ redrive route the same way."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.definitions import Settings
from duetime.domain.keys import shard_of
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.service import executions as cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job
from duetime.service.ports import Received, split_receipt
from duetime.service.redrive import list_dead_letters, redrive
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS
from tests.integration.succeeded import first_runs_once_succeeded, worker_loop
from tests.queue_depths import class_queue_depths

pytestmark = BOTH_BACKENDS
QUEUES = 2


@pytest.fixture
def test_settings() -> Settings:
    return (
        Settings(shards=4, preload_interval_seconds=5, preload_window_seconds=30)
        .with_lease_seconds(30)
        .with_class_queues({"default": QUEUES})
    )


def receive_all(ports, wait: float = 0) -> list[Received]:
    """Receive until the class's queues give nothing more (each receive reads both)."""
    taken: list[Received] = []
    while batch := ports.queues.receive("default", 10, wait, 30):
        taken += batch
    return taken


def queue_of(received: Received) -> int:
    return split_receipt(received.receipt)[0]


def one_off(clock, seconds: float = 10, **extra) -> JobSpec:
    at = format_time(clock.now + timedelta(seconds=seconds))
    return JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": at}, **extra})


def test_jobs_of_every_shard_run_through_both_queues_each_message_on_the_queue_of_its_shard(ports, clock):
    worker = Worker(ports, "default", "w1", concurrency=1)
    # Sent by the API's submit (due within the window) and by the pre-loader (due after it)
    sent_at_submit = [submit_job(ports, "alice", one_off(clock, seconds=10))[0] for _ in range(24)]
    preloaded = [submit_job(ports, "alice", one_off(clock, seconds=50))[0] for _ in range(8)]
    jobs = sent_at_submit + preloaded
    assert {shard_of(j.job_id, 4) for j in sent_at_submit} == {0, 1, 2, 3}
    assert {shard_of(j.job_id, 4) % QUEUES for j in preloaded} == {0, 1}
    clock.advance(30)
    preload(ports, "preloader")
    received = receive_all(ports)
    # (the pre-loader sends again what the API sent: a duplicate is dropped at claim)
    assert {r.message.job_id for r in received} == {j.job_id for j in jobs}
    # Each queue received some, each message the queue of its execution's shard
    assert {queue_of(r) for r in received} == {0, 1}
    assert all(queue_of(r) == r.message.key.shard % QUEUES for r in received)
    for r in received:  # visible at once again, so the worker receives and runs each
        ports.queues.extend("default", r.receipt, 0)
    clock.advance(30)  # every run is due
    outcomes = [worker.process(r) for r in receive_all(ports)]
    assert outcomes.count("succeeded") == len(jobs)
    for job in jobs:
        [execution] = ports.store.executions_of_job(job.job_id)
        assert execution.status == ExecutionStatus.SUCCEEDED
    assert receive_all(ports) == []  # every message was deleted from the queue it came from


def test_a_batched_delete_and_a_visibility_change_reach_the_queue_each_message_came_from(ports, clock):
    for _ in range(12):
        submit_job(ports, "alice", one_off(clock, seconds=0))
    received = receive_all(ports)
    assert {queue_of(r) for r in received} == {0, 1}
    kept, deleted = received[0], received[1:]
    ports.queues.delete_batch("default", [r.receipt for r in deleted[:10]])
    for r in deleted[10:]:
        ports.queues.delete("default", r.receipt)
    ports.queues.extend("default", kept.receipt, 0)
    [again] = receive_all(ports)
    assert again.message == kept.message and again.receive_count == 2 and queue_of(again) == queue_of(kept)


def test_retries_and_a_dead_letter_redrive_go_to_the_queue_of_the_shard(ports, clock):
    retry = {"maxAttempts": 2, "baseDelaySeconds": 1, "maxDelaySeconds": 1}
    jobs = [
        submit_job(ports, "alice", one_off(clock, handler="demo.fail", payload={"times": 5}, retry=retry))[0]
        for _ in range(6)
    ]
    assert {shard_of(j.job_id, 4) % QUEUES for j in jobs} == {0, 1}
    clock.advance(10)
    for _attempt in range(2):  # both attempts fail; the first failure's retry is sent to the shard's queue
        received = receive_all(ports)
        assert len(received) == len(jobs)
        assert all(queue_of(r) == r.message.key.shard % QUEUES for r in received)
        for r in received:
            claim = cases.claim_execution(ports, r.message, "w")
            assert claim.verdict == cases.ClaimVerdict.CLAIMED
            cases.complete(ports, r.message.key, claim.execution.attempt, succeeded=False, error="boom")
            ports.queues.delete("default", r.receipt)
        clock.advance(2)
    assert drain_dead_letters(ports, "default") == len(jobs)  # the class's one DLQ
    failed = list_dead_letters(ports, "alice", 10, None).items
    assert len(failed) == len(jobs)
    report = redrive(ports, "alice", [f.execution_id for f in failed])
    assert len(report.retried) == len(jobs)
    worker = Worker(ports, "default", "w1", concurrency=1)
    received = receive_all(ports)
    assert {queue_of(r) for r in received} == {0, 1}
    assert all(queue_of(r) == r.message.key.shard % QUEUES for r in received)
    for r in received:
        worker.process(r)  # fails again (times: 5), but ran: the redriven run was received and claimed
    for job in jobs:
        [execution] = ports.store.executions_of_job(job.job_id)
        assert execution.attempt == 3


def test_the_worker_loop_runs_what_is_due_on_both_queues_and_deletes_each_on_its_own(ports, clock):
    # Given jobs of every shard due now, half of them on each queue
    jobs = [submit_job(ports, "alice", one_off(clock, seconds=0))[0] for _ in range(16)]
    assert {shard_of(j.job_id, 4) % QUEUES for j in jobs} == {0, 1}
    # When `duetime worker`'s receive loop runs (batched deletes, a receive reading both queues)
    worker = Worker(ports, "default", "w1", concurrency=4)
    with worker_loop(worker):
        rows = first_runs_once_succeeded(ports, jobs)
    # Then every one ran, and each message was deleted from the queue it came from (none is left in flight)
    assert all(r.status == ExecutionStatus.SUCCEEDED for r in rows)
    assert class_queue_depths(ports.queues) == [0, 0]
