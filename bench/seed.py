"""Seed a `duetime local --data-dir` SQLite database with many future one-off jobs, fast, for the figures
"with 1,000,000 future executions stored": through the SQLite adapter, a batch per transaction.

Each seeded job is a one-off of the benchmark's own shape (`demo.echo`, owner `seeded`) with its one
execution due between SEED_FROM and SEED_UNTIL ahead, spread evenly, so none of them comes due during
the benchmark while all of them sit in the `open` index and the due partitions of the coming weeks.
The jobs go in with the adapter's own row encoding (one INSERT per batch); the executions through the
store port's `put_executions` (one transaction per batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.domain.models import Execution, Job, JobSpec, format_time
from duetime.service.dispatch import new_execution

BATCH = 10_000
SEED_FROM = timedelta(hours=2)
SEED_UNTIL = timedelta(days=30)
OWNER = "seeded"
# `duetime local`'s own defaults (its --shards and --lease-seconds), which the seeded keys must match.
SHARDS = 8
LEASE_SECONDS = 30
PREFIX = "duetime"


def seed(data_dir: Path, count: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """`count` future one-off jobs and their executions in `data_dir`'s database; how long it took."""
    from duetime.adapters.sqlite.db import DATABASE_FILE, Database
    from duetime.adapters.sqlite.store import SqliteStore
    from duetime.local.backends import SQLITE, local_settings

    database = Database(data_dir / DATABASE_FILE)
    store = SqliteStore(database, local_settings(SQLITE, PREFIX, SHARDS, LEASE_SECONDS))
    started = time.monotonic()
    now = datetime.now(UTC).replace(microsecond=0)
    step = (SEED_UNTIL - SEED_FROM) / max(1, count)
    template = one_off_template(now, OWNER, "seeded", now + SEED_FROM)
    try:
        for first in range(0, count, BATCH):
            jobs, executions = [], []
            for index in range(first, min(count, first + BATCH)):
                due = now + SEED_FROM + step * index
                job = one_off_copy(template, f"j_seed{index:011x}", due, name=f"seeded-{index}")
                jobs.append(job)
                executions.append(new_execution(job, due))
            store_batch(store, jobs, executions)
            done = first + len(jobs)
            if done % (BATCH * 20) == 0 or done == count:
                log(f"    seeded {done:,} of {count:,} in {time.monotonic() - started:.0f} s")
    finally:
        database.close()
    size = sum(p.stat().st_size for p in data_dir.glob(DATABASE_FILE + "*"))
    return {
        "executions": count,
        "jobs": count,
        "seconds": round(time.monotonic() - started, 1),
        "databaseMb": round(size / 2**20, 1),
        "dueFrom": format_time(now + SEED_FROM),
        "dueUntil": format_time(now + SEED_UNTIL),
        "how": "through the SQLite adapter: jobs with its row encoding, executions by Store.put_executions, "
        f"{BATCH:,} per transaction",
    }


def one_off_template(now: datetime, owner: str, name: str, due: datetime) -> Job:
    """A one-off `demo.echo` job due at `due`, created `now`: what seeded and benchmark jobs are copied from."""
    spec = JobSpec.model_validate({"name": name, "handler": "demo.echo", "schedule": {"at": format_time(due)}})
    return Job(**spec.model_dump(), job_id="j_0", owner=owner, created_at=now, updated_at=now)


def one_off_copy(template: Job, job_id: str, due: datetime, **more: Any) -> Job:
    """`template` as job `job_id`, due at `due` (and any other field in `more`)."""
    schedule = template.schedule.model_copy(update={"at": due})
    return template.model_copy(update={"job_id": job_id, "schedule": schedule, **more})


def store_batch(store: Any, jobs: list[Job], executions: list[Execution]) -> None:
    """Jobs in one transaction with the SQLite adapter's row encoding, then their executions by
    `Store.put_executions` (one more); raises RuntimeError if any execution existed already."""
    from duetime.adapters.records import created_key
    from duetime.adapters.sqlite.items import job_to_doc

    rows = [(job.job_id, job.owner, created_key(job), job_to_doc(job)) for job in jobs]
    with store.db.write() as conn:
        conn.executemany("INSERT INTO jobs (job_id, owner, created_key, doc) VALUES (?, ?, ?, ?)", rows)
    created = store.put_executions(executions)
    if len(created) != len(executions):
        raise RuntimeError(f"seeding: {len(executions) - len(created)} executions existed already")
