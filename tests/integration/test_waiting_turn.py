"""A run only waiting its turn never ages towards the DLQ (issue 31): each wait deletes the message the worker
received and sends a fresh copy for later, so its receive count starts again; on both backends, with the
worker runtime driven under the hand clock (the Lambda worker's own test is in test_lambda_worker.py)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from duetime import JobContext, handler
from duetime.definitions import MAX_RECEIVE_COUNT, Settings
from duetime.domain.models import ExecutionStatus, JobSpec, Overlap
from duetime.service import executions as cases
from duetime.service.backfill import backfill
from duetime.service.deadletters import drain_dead_letters
from duetime.service.jobs import submit_job
from duetime.service.outcomes import RunOutcome
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

LEASE_SECONDS = 3
RUN_SECONDS = 8
# Each run looks at every waiting copy twice, so the calls grow with the square of the slots: 20 on SQLite, 8 on
# moto (whose calls are slow: 20 slots there took 93 s idle and over 300 s on a loaded machine).
SLOTS = {"sqlite": 20, "moto": 8}
# Hidden from every other receive while the test handles it: the waits below send fresh copies, visible at once
# (the queues run on the real clock with no delay, the service on the hand clock).
IN_FLIGHT = 900


@pytest.fixture
def test_settings() -> Settings:
    return Settings(shards=4, preload_interval_seconds=5, preload_window_seconds=30).with_lease_seconds(LEASE_SECONDS)


class SerialBackfill:
    """The world an 8 s run lives in: while it runs (the hand clock moved a lease-third at a time, its lease
    renewed), another worker receives every waiting copy and handles it, as workers polling the queue do."""

    def __init__(self) -> None:
        self.ports: Any = None
        self.runs: Counter[str] = Counter()
        self.waits: Counter[str] = Counter()
        self.receive_counts: Counter[int] = Counter()

    def run(self, ctx: JobContext) -> None:
        self.runs[ctx.execution_id] += 1
        neighbour = Worker(self.ports, "default", "w2", concurrency=1)
        for tick in range(RUN_SECONDS // 2):
            self.ports.clock.advance(2)
            cases.report_heartbeat(self.ports, ctx.execution_id, ctx.attempt, ctx.worker_id, ctx.claim_token)
            if tick % 2 == 0:
                continue  # the waiting copies are looked at every 4 s (moto's calls are slow; SQLite's are not)
            for received in self.receive_all():
                assert neighbour.process(received) == RunOutcome.BUSY  # the run waits its turn
                self.waits[received.message.execution_id] += 1

    def receive_all(self) -> list[Any]:
        out = []
        while batch := self.ports.queues.receive("default", 10, 0, IN_FLIGHT):
            out += batch
        self.receive_counts.update(r.receive_count for r in out)
        return out


WORLD = SerialBackfill()


@handler("tests.eight_seconds_of_the_hand_clock", in_process=True)
def eight_seconds(ctx: JobContext) -> None:
    WORLD.run(ctx)


def test_a_serial_backfill_of_8_s_runs_with_a_3_s_lease_runs_every_slot_once(ports, clock, backend):
    # Given a yearly job whose past slots (20 on SQLite) are backfilled serially (overlap forbid), each run 8 s
    slots = SLOTS[backend]
    WORLD.__init__()
    WORLD.ports = ports
    worker = Worker(ports, "default", "w1", concurrency=1)
    worker.announcer.announce()  # it serves the handler below: the API accepts the name
    body = {"name": "y", "handler": "tests.eight_seconds_of_the_hand_clock", "schedule": {"cron": "0 0 1 1 *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    start, end = datetime(2026 - slots, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
    assert backfill(ports, "alice", job.job_id, start, end, Overlap.FORBID).created == slots
    # When a worker of one slot takes a message at a time until the queue is empty (the other waiting copies
    # stay visible to the second worker while a run goes on)
    for _ in range(10 * slots):
        batch = ports.queues.receive("default", 1, 0, IN_FLIGHT)
        if not batch:
            break
        WORLD.receive_counts.update(r.receive_count for r in batch)
        worker.process(batch[0])
    # Then each slot ran once, one after another, and all succeeded
    rows = sorted(
        (e for e in ports.store.executions_of_job(job.job_id, limit=100) if e.kind == "backfill"),
        key=lambda e: e.scheduled_at,
    )
    assert len(rows) == slots and {e.status for e in rows} == {ExecutionStatus.SUCCEEDED}
    assert sorted(WORLD.runs.values()) == [1] * slots and {e.attempt for e in rows} == {1}
    for earlier, later in itertools.pairwise(rows):
        assert earlier.finished_at is not None and later.started_at is not None
        assert later.started_at >= earlier.finished_at
    # And though the last slot waited every other run (19 on SQLite: 152 s, dozens of looks), no copy was
    # received twice: none aged towards the queue's receive limit, and the DLQ holds nothing to fail
    assert max(WORLD.waits.values()) >= 2 * (slots - 1) - 1
    assert set(WORLD.receive_counts) == {1}
    assert ports.queues.dead_letter_depth("default") == 0 and drain_dead_letters(ports, "default") == 0


def test_a_run_waiting_its_turn_more_times_than_the_receive_limit_is_never_failed(ports, clock):
    # Given a serial backfill of two slots whose first is running (claimed by another worker)
    body = {"name": "y", "handler": "demo.echo", "schedule": {"cron": "0 0 1 1 *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    backfill(ports, "alice", job.job_id, datetime(2024, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    first, second = sorted(receive_all(ports), key=lambda r: r.message.execution_id)
    assert cases.claim_execution(ports, first.message, "w-long").verdict == cases.ClaimVerdict.CLAIMED
    worker = Worker(ports, "default", "w1", concurrency=1)
    # When the second is received and told to wait more times than the queue's maxReceiveCount
    received = second
    for _ in range(MAX_RECEIVE_COUNT + 5):
        assert worker.process(received) == RunOutcome.BUSY
        clock.advance(LEASE_SECONDS)
        cases.heartbeat(ports, first.message.key, 1)
        [received] = receive_all(ports)  # the fresh copy, visible when it should look again
        assert received.receive_count == 1 and received.message.execution_id == second.message.execution_id
    # Then nothing reached the DLQ and it still waits; once the first ends, it runs
    assert ports.queues.dead_letter_depth("default") == 0 and drain_dead_letters(ports, "default") == 0
    assert ports.store.get_execution(second.message.key).status == ExecutionStatus.SCHEDULED
    cases.complete(ports, first.message.key, 1, succeeded=True)
    assert worker.process(received) == RunOutcome.SUCCEEDED


def test_a_serial_backfill_message_redriven_while_it_waits_is_left_waiting_not_failed(ports, clock):
    # Given a serial backfill's second slot waiting behind its first, running
    body = {"name": "y", "handler": "demo.echo", "schedule": {"cron": "0 0 1 1 *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    backfill(ports, "alice", job.job_id, datetime(2024, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    first, second = sorted(receive_all(ports), key=lambda r: r.message.execution_id)
    assert cases.claim_execution(ports, first.message, "w-long").verdict == cases.ClaimVerdict.CLAIMED
    # When a message of the second reaches the DLQ all the same (one queued before a wait was a fresh copy)
    ports.queues.dead_letter("default", json.loads(second.message.to_body()))
    assert drain_dead_letters(ports, "default") == 1
    # Then it is not failed as poison: it still waits, and nobody is told of a failure
    assert ports.store.get_execution(second.message.key).status == ExecutionStatus.SCHEDULED
    assert ports.notifier.sent == []


def receive_all(ports) -> list[Any]:
    out = []
    while batch := ports.queues.receive("default", 10, 0, IN_FLIGHT):
        out += batch
    return out
