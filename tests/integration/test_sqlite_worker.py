"""The worker runtime on the SQLite adapters and the real clock: executions start at their due instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.wiring import sqlite_ports
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.notify import ConsoleNotifier
from duetime.service.jobs import submit_job
from duetime.worker.observe import CountingObserver
from duetime.worker.runtime import Worker

from tests.integration.succeeded import first_runs_once_succeeded, worker_loop


def test_one_off_jobs_start_at_their_due_instant_not_before(tmp_path, test_settings):
    db = Database(tmp_path / "duetime.sqlite3")
    ports = sqlite_ports(db, test_settings, ConsoleNotifier())
    worker = Worker(ports, "default", "w1", concurrency=4, observer=CountingObserver())
    try:
        with worker_loop(worker):
            # Given one-off jobs due between 0.3 s and 1.5 s from now, sent at submit (within the horizon)
            start = datetime.now(UTC)
            jobs = []
            for i in range(12):
                at = format_time(start + timedelta(seconds=0.3 + 0.1 * i))
                spec = JobSpec.model_validate({"name": f"t{i}", "handler": "demo.echo", "schedule": {"at": at}})
                jobs.append(submit_job(ports, "alice", spec)[0])
            # When the worker runs them
            rows = first_runs_once_succeeded(ports, jobs, poll=0.1)
    finally:
        db.close()
    # Then each started at its due instant: never before, and well within a second after
    assert all(r.status == ExecutionStatus.SUCCEEDED for r in rows)
    for row in rows:
        assert row.started_at is not None
        assert row.due_at <= row.started_at < row.due_at + timedelta(seconds=1)
