"""A worker's drain alone, on SQLite: what one run costs the worker process, and how long each of its threads
holds the database's write lock (what a second worker process on the same file would wait for).

`count` one-off `demo.echo` jobs are created through the API's handler in this process (a `duetime local`
system without workers), all due at one instant; at that instant one Worker of `slots` slots (as `duetime
local`'s worker process runs it) drains them in this process's threads. Printed for each round: CPU (user +
system) per run, runs a second, and the seconds each thread held the write lock (from each transaction's
BEGIN IMMEDIATE to its COMMIT) against the drain's wall time.

    .venv/bin/python -m bench.worker_drain [--count 5000] [--slots 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.adapters.sqlite.db import Database
from duetime.local.http_bridge import to_event
from duetime.local.system import LocalSystem
from duetime.worker.kinds import Targets
from duetime.worker.observe import SUCCEEDED
from duetime.worker.runtime import Worker

LEAD_SECONDS = 1.0  # with count / 500 s more: the jobs are due after the last is created (~1,000/s here)
DRAIN_LIMIT_SECONDS = 300.0


@contextmanager
def lock_holds() -> Iterator[dict[str, float]]:
    """Seconds each thread (by the last part of its name) held the write lock while the block ran."""
    held: dict[str, float] = {}
    begin, commit = Database._begin, Database._commit
    began = threading.local()

    def timed_begin(self: Database) -> sqlite3.Connection:
        conn = begin(self)
        began.at = time.perf_counter()
        return conn

    def timed_commit(self: Database, conn: sqlite3.Connection) -> None:
        try:
            commit(self, conn)
        finally:
            name = threading.current_thread().name.rsplit("-", 1)[-1]
            held[name] = held.get(name, 0.0) + time.perf_counter() - getattr(began, "at", time.perf_counter())

    Database._begin, Database._commit = timed_begin, timed_commit  # type: ignore[method-assign]
    try:
        yield held
    finally:
        Database._begin, Database._commit = begin, commit  # type: ignore[method-assign]


def measure(count: int, slots: int) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="duetime-bench-drain-"))
    system = LocalSystem(directory, port=0, workers=0, backend="sqlite", worker_process=True)
    system.start()
    try:
        assert system.api is not None and system.ports is not None
        headers = {"Host": "127.0.0.1", "Authorization": f"Bearer {system.token()}"}
        due = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS + count / 500)
        at = due.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for index in range(count):
            body = json.dumps({"name": f"d{index}", "handler": "demo.echo", "schedule": {"at": at}}).encode()
            event = to_event("POST", "/jobs", {**headers, "Content-Length": str(len(body))}, body)
            assert system.api.handler(event, None)["statusCode"] == 201
        ports = system.ports
        workers = [
            Worker(ports, name, f"drain-{name}-{secrets.token_hex(2)}", slots, targets=Targets())
            for name in ports.settings.job_classes
        ]
        threads = [threading.Thread(target=worker.run, args=(5.0,)) for worker in workers]
        time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))

        def done() -> int:
            return sum(worker.observer.counts[SUCCEEDED] for worker in workers)

        timed_from = time.perf_counter()
        with lock_holds() as held:
            cpu, wall = time.process_time(), time.perf_counter()
            for thread in threads:
                thread.start()
            while done() < count and time.perf_counter() - wall < DRAIN_LIMIT_SECONDS:
                time.sleep(0.01)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            for worker in workers:
                worker.stopping.set()
            for thread in threads:
                thread.join()
        timed = time.perf_counter() - timed_from  # the drain, then the workers' stop: all the lock was timed
        return {
            "count": count,
            "slots": slots,
            "succeeded": done(),
            "cpuMsPerRun": round(cpu / count * 1000, 3),
            "runsPerSecond": round(count / wall),
            "drainSeconds": round(wall, 2),
            "writeLockHeldSeconds": {name: round(seconds, 3) for name, seconds in sorted(held.items())},
            "timedSeconds": round(timed, 3),
        }
    finally:
        system.stop()
        shutil.rmtree(directory, ignore_errors=True)


def run(count: int, slots: int, rounds: int, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    runs = []
    for _ in range(rounds):
        result = measure(count, slots)
        held = sum(result["writeLockHeldSeconds"].values())
        log(
            f"    {result['succeeded']}/{count} runs in {result['drainSeconds']} s ({result['runsPerSecond']}/s), "
            f"{result['cpuMsPerRun']} ms CPU a run; write lock held {held:.2f} s "
            f"({held / result['drainSeconds']:.0%} of the drain): {result['writeLockHeldSeconds']}"
        )
        runs.append(result)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_drain", description=__doc__)
    parser.add_argument("--count", type=int, default=5000, help="one-off jobs due together (5,000)")
    parser.add_argument("--slots", type=int, default=8, help="the worker's slots (8, as duetime local's)")
    parser.add_argument("--rounds", type=int, default=2, help="runs, each on a fresh data dir (2)")
    options = parser.parse_args(argv)
    print(f"... a worker's drain of {options.count:,} one-offs due together, {options.slots} slots, on SQLite")
    run(options.count, options.slots, options.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
