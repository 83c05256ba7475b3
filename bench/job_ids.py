"""What a job id's shape costs SQLite: random ids (duetime's until 2026-12-01) against time-ordered ones
(`domain.keys.time_ordered_hex`, docs/decisions.md 15), in one run, through the SQLite adapter itself.

For each shape: a fresh database file holding `stored` jobs with their first executions (written in
batches of 10,000 as bench/seed.py writes them, ids of that shape made earlier), then `count` jobs created
one transaction each as the API does (`SqliteStore.create_job`), then each of them read back as a worker's
claim does (`SqliteStore.get_job`). Printed: CPU (user + system) and wall time per create and per read,
for each shape and their ratio. The shapes run by turns, `rounds` times each.

    .venv/bin/python -m bench.job_ids [--stored 150000] [--count 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.adapters.sqlite.db import DATABASE_FILE, Database
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.domain.keys import new_job_id, time_ordered_hex
from duetime.service.dispatch import new_execution

from bench.seed import BATCH, one_off_copy, one_off_template, store_batch

SHAPES = ("random", "time-ordered")


def random_hex() -> str:
    """The id digits duetime made until 2026-12-01: 64 random bits."""
    return secrets.token_hex(8)


def measure(shape: str, stored: int, count: int) -> dict[str, Any]:
    """One shape on a fresh file: the per-job cost of `count` creates and reads with `stored` jobs there."""
    directory = Path(tempfile.mkdtemp(prefix="duetime-bench-ids-"))
    database = Database(directory / DATABASE_FILE)
    try:
        store = SqliteStore(database, Settings(shards=8))
        now = datetime.now(UTC).replace(microsecond=0)
        base = one_off_template(now, "bench", "ids", now + timedelta(hours=2))
        now_ms = time.time_ns() // 1_000_000  # the stored jobs were made before the timed ones, oldest first
        earlier: Callable[[int], str] = (
            (lambda i: random_hex()) if shape == "random" else (lambda i: time_ordered_hex(now_ms - stored + i))
        )
        for first in range(0, stored, BATCH):
            jobs, executions = [], []
            for index in range(first, min(stored, first + BATCH)):
                due = now + timedelta(hours=2, seconds=index)
                job = one_off_copy(base, new_job_id(earlier(index)), due)
                jobs.append(job)
                executions.append(new_execution(job, due))
            store_batch(store, jobs, executions)
        database.query_one("PRAGMA wal_checkpoint(TRUNCATE)")
        made = random_hex if shape == "random" else time_ordered_hex
        due = now + timedelta(hours=1)
        timed = [one_off_copy(base, new_job_id(made()), due) for _ in range(count)]
        firsts = [new_execution(job, due) for job in timed]
        cpu, wall = time.process_time(), time.perf_counter()
        for job, first_execution in zip(timed, firsts, strict=True):
            store.create_job(job, first_execution)
        create_cpu, create_wall = time.process_time() - cpu, time.perf_counter() - wall
        cpu, wall = time.process_time(), time.perf_counter()
        for job in timed:
            assert store.get_job(job.job_id) is not None
        read_cpu, read_wall = time.process_time() - cpu, time.perf_counter() - wall
        return {
            "shape": shape,
            "stored": stored,
            "count": count,
            "createCpuUs": round(create_cpu / count * 1e6, 1),
            "createWallUs": round(create_wall / count * 1e6, 1),
            "readCpuUs": round(read_cpu / count * 1e6, 1),
            "readWallUs": round(read_wall / count * 1e6, 1),
        }
    finally:
        database.close()
        shutil.rmtree(directory, ignore_errors=True)


def run(stored: int, count: int, rounds: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    runs = []
    for _ in range(rounds):
        for shape in SHAPES:
            result = measure(shape, stored, count)
            log(
                f"    {shape:>12}: create {result['createCpuUs']} us CPU ({result['createWallUs']} us wall), "
                f"read {result['readCpuUs']} us CPU ({result['readWallUs']} us wall)"
            )
            runs.append(result)
    medians = {
        shape: {
            key: round(statistics.median(r[key] for r in runs if r["shape"] == shape), 1)
            for key in ("createCpuUs", "createWallUs", "readCpuUs", "readWallUs")
        }
        for shape in SHAPES
    }
    ratio = {
        key: round(medians["random"][key] / medians["time-ordered"][key], 2) if medians["time-ordered"][key] else None
        for key in medians["random"]
    }
    log(f"    medians: {medians}; random / time-ordered: {ratio}")
    return {"runs": runs, "medians": medians, "randomOverOrdered": ratio}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.job_ids", description=__doc__)
    parser.add_argument("--stored", type=int, default=150_000, help="jobs already in the file (150,000)")
    parser.add_argument("--count", type=int, default=10_000, help="jobs created and read back, timed (10,000)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each shape, by turns (2)")
    options = parser.parse_args(argv)
    print(f"... job ids: {options.stored:,} stored, {options.count:,} created and read back, one by one")
    run(options.stored, options.count, options.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
