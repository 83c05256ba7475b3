"""The worker's receive loop: it runs what is due and deletes handled messages in batches, and its finisher
thread tends the runs (a run past its timeout ends failed while the others go on)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from dataclasses import replace

import pytest
from duetime.adapters.sqlite.db import Database
from duetime.domain.events import Event
from duetime.domain.models import ExecutionStatus, JobSpec, JobStatus
from duetime.service.handlers import announce_handlers
from duetime.service.jobs import submit_job
from duetime.worker.observe import CountingObserver
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS
from tests.integration import sample_handlers
from tests.integration.succeeded import first_runs_once_succeeded, worker_loop


def test_the_receive_loop_runs_due_executions_and_batches_its_deletes(ports, clock):
    calls: Counter[str] = Counter()
    ports.queues.client.meta.events.register("before-call.sqs.*", lambda model, **_: calls.update([model.name]))
    jobs = [
        submit_job(
            ports,
            "alice",
            JobSpec.model_validate(
                {"name": f"t{i}", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:00Z"}}
            ),
        )[0]
        for i in range(20)
    ]
    worker = Worker(ports, "default", "w1", concurrency=8, observer=CountingObserver())
    with worker_loop(worker):
        rows = first_runs_once_succeeded(ports, jobs)
    assert all(r.status == ExecutionStatus.SUCCEEDED for r in rows)
    assert calls["DeleteMessage"] == 0
    assert 2 <= calls["DeleteMessageBatch"] <= 20
    assert ports.queues.receive("default", 10, 0, 0) == []


@BOTH_BACKENDS
def test_a_run_past_its_timeout_ends_failed_at_once_while_the_other_slot_runs_the_rest(ports, clock):
    assert sample_handlers.sleeps_in_process  # registered in this process, as a worker's --handlers module
    announce_handlers(ports, "default", "w-samples", ["sample.sleeps_in_process"])
    body = {"schedule": {"at": "2026-12-01T09:00:00Z"}, "retry": {"maxAttempts": 1}}
    slow, _ = submit_job(
        ports,
        "alice",
        JobSpec.model_validate(
            {
                **body,
                "name": "slow",
                "handler": "sample.sleeps_in_process",
                "payload": {"seconds": 10},
                "timeoutSeconds": 1,
            }
        ),
    )
    quick = [
        submit_job(ports, "alice", JobSpec.model_validate({**body, "name": f"q{i}", "handler": "demo.echo"}))[0]
        for i in range(4)
    ]
    worker = Worker(ports, "default", "w1", concurrency=2, observer=CountingObserver())
    started = time.monotonic()
    with worker_loop(worker, grace_seconds=0.1):
        rows = first_runs_once_succeeded(ports, quick, seconds=20)
        while ports.store.executions_of_job(slow.job_id)[0].status != ExecutionStatus.FAILED:
            assert time.monotonic() - started < 20
            time.sleep(0.1)
        ended_after = time.monotonic() - started
    assert all(r.status == ExecutionStatus.SUCCEEDED for r in rows)
    [timed_out] = ports.store.executions_of_job(slow.job_id)
    assert timed_out.error == "timeout after 1 s" and timed_out.attempt == 1
    # Ended at its timeout and the grace to stop (min(5, lease / 3) = 5 s), not when its handler returned:
    # the handler ignores the request to stop and sleeps 10 s.
    assert ended_after < 9


class Recorded:
    """An event sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def publish(self, events: list[Event]) -> None:
        self.events.extend(events)


@pytest.mark.parametrize("backend", ["sqlite"])  # a batch is one transaction on SQLite only
@pytest.mark.parametrize(
    "handler, payload",
    [("demo.echo", {}), ("demo.fail", {"times": 5, "permanent": True})],
    ids=["succeeded", "failed-for-good"],
)
def test_runs_whose_ends_did_not_commit_publish_no_event_and_stay_running(ports, clock, monkeypatch, handler, payload):
    # Given a worker whose finisher's first batch of ends fails at its commit
    recorded = Recorded()
    ports = replace(ports, events=recorded)
    spec = {"name": "e", "handler": handler, "payload": payload, "schedule": {"at": "2026-12-01T09:00:00Z"}}
    job = submit_job(ports, "alice", JobSpec.model_validate(spec))[0]
    commit, failed = Database._commit, threading.Event()

    def failing_once(self: Database, conn: sqlite3.Connection) -> None:
        if threading.current_thread().name.endswith("-finish") and not failed.is_set():
            failed.set()
            conn.execute("ROLLBACK")
            raise sqlite3.OperationalError("disk I/O error")
        commit(self, conn)

    monkeypatch.setattr(Database, "_commit", failing_once)
    worker = Worker(ports, "default", "w1", concurrency=2)
    # When it runs the job's one run
    with worker_loop(worker):
        assert failed.wait(30)
    worker.flush_events()
    # Then no event tells of an end that was not stored, and the run still holds its lease (its message comes
    # back when the lease ends, as after a crash)
    [row] = ports.store.executions_of_job(job.job_id)
    assert row.status == ExecutionStatus.RUNNING and row.attempt == 1
    assert not [e for e in recorded.events if e.detail_type.startswith("Execution")], recorded.events
    assert ports.store.get_job(job.job_id).status == JobStatus.ACTIVE
