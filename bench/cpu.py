"""CPU time per one-off job on `duetime local` (SQLite): what its process tree spends to accept one over
HTTP, and to accept and run one, counted from /proc in CPU seconds.

Lateness and throughput figures move with whatever else the machine runs; CPU seconds per job barely do,
so this is the figure to compare two versions of the hot path by. Two phases against one `duetime local`
(its default worker slots), each over `count` jobs sent from 4 keep-alive connections as fast as
they are answered:
- accept: jobs due 10 minutes out (beyond the dispatch horizon: nothing is sent or run), so the tree's CPU is
  the API's (plus its idle timers);
- accept and run: jobs due 1 s after their submit, so each is also sent, received, claimed, run and
  finished by the worker process; the phase ends once every one has finished.
The client's own CPU per request is reported beside them.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.adapters.sqlite.db import DATABASE_FILE

from bench.systems import DuetimeLocal, DuetimeSubmitter, descendants

CONNECTIONS = 4
WARM_UP = 200
RUN_WAIT_SECONDS = 120.0


def tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of `pids` so far (a process that ended counts no more)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / 100  # USER_HZ


def succeeded(data_dir: Path) -> int:
    """Executions that succeeded, read from the database file itself (a read-only connection of this
    process: asking the API would charge the server's CPU)."""
    with closing(sqlite3.connect(f"file:{data_dir / DATABASE_FILE}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM executions WHERE status = 'succeeded'").fetchone()[0])


def send(submitters: list[DuetimeSubmitter], count: int, lead_seconds: float, first: int) -> list[str]:
    """`count` one-offs, each due `lead_seconds` after its own submit, from every submitter at once."""
    keys: list[str] = []
    lock = threading.Lock()

    def loop(index: int, submitter: DuetimeSubmitter) -> None:
        for n in range(count // len(submitters)):
            key = submitter.submit(first + index * count + n, datetime.now(UTC) + timedelta(seconds=lead_seconds))
            with lock:
                keys.append(key)

    threads = [threading.Thread(target=loop, args=(i, s)) for i, s in enumerate(submitters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return keys


def phase(
    system: DuetimeLocal, submitters: list[DuetimeSubmitter], count: int, lead_seconds: float, first: int
) -> dict[str, Any]:
    pids = descendants(system.process.pid) if system.process is not None else []
    done_before = succeeded(system.data_dir)
    server_before, client_before, started = tree_cpu_seconds(pids), time.process_time(), time.monotonic()
    keys = send(submitters, count, lead_seconds, first)
    submit_seconds = time.monotonic() - started
    client = time.process_time() - client_before
    if lead_seconds < 60:  # wait for every run to finish: their CPU belongs to this phase
        deadline = time.monotonic() + RUN_WAIT_SECONDS
        while succeeded(system.data_dir) - done_before < len(keys) and time.monotonic() < deadline:
            time.sleep(0.2)
    server = tree_cpu_seconds(pids) - server_before
    unfinished = len(keys) - (succeeded(system.data_dir) - done_before)
    return {
        "jobs": len(keys),
        "serverCpuMsPerJob": round(server / len(keys) * 1000, 3),
        "clientCpuMsPerJob": round(client / len(keys) * 1000, 3),
        "acceptedPerSecond": round(len(keys) / submit_seconds, 1),
        "unfinished": unfinished if lead_seconds < 60 else None,
    }


def measure(count: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    system = DuetimeLocal("sqlite")  # its default worker slots
    system.start()
    try:
        submitters = [system.submitter() for _ in range(CONNECTIONS)]
        send(submitters[:1], WARM_UP, 600, 0)
        accept = phase(system, submitters, count, 600, 10**6)
        log(f"    accept: {accept}")
        run = phase(system, submitters, count, 1, 2 * 10**6)
        log(f"    accept and run: {run}")
        for submitter in submitters:
            submitter.close()
    finally:
        system.stop()
    return {
        "accept": accept,
        "acceptAndRun": run,
        "runCpuMsPerJob": round(run["serverCpuMsPerJob"] - accept["serverCpuMsPerJob"], 3),
    }


def render(result: dict[str, Any]) -> list[str]:
    accept, run = result["accept"], result["acceptAndRun"]
    return [
        "",
        "CPU per one-off job on duetime local (SQLite; process CPU seconds from /proc, not wall time)",
        f"  accept over HTTP: {accept['serverCpuMsPerJob']} ms server, {accept['clientCpuMsPerJob']} ms client "
        f"({accept['jobs']} jobs, {accept['acceptedPerSecond']}/s on {CONNECTIONS} connections)",
        f"  accept and run:   {run['serverCpuMsPerJob']} ms server, so a run costs {result['runCpuMsPerJob']} ms "
        f"({run['jobs']} jobs)",
    ]
