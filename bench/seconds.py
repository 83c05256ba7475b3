"""Issue 34's precision figure: how late each run of a `*/5 * * * * *` job starts against its slot, locally.

`python -m bench.seconds [--seconds 120] [--backend sqlite|moto]` runs `duetime local` in this process (the
pre-loader on its local cadence, four worker threads), submits one job every 5 seconds through the service,
lets it run for `--seconds`, cancels it and reads its executions back. Two figures per run:

* `claimed`: the execution's startedAt (the worker's claim, as the store recorded it) minus its scheduledAt;
* `handler`: the wall time the handler was entered (noted by an in-process handler) minus the slot; on
  SQLite only (on moto the workers run in the Lambda emulation, out of this process: the job runs demo.echo).

It prints the percentiles, the worst, and how many runs started within 50 ms of their slot (issue 34 asks for
every one), with the command line it ran. docs/schedules.md records the figure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from duetime import JobContext, handler
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.local.backends import MOTO, SQLITE
from duetime.local.system import LocalSystem
from duetime.service.context import Ports
from duetime.service.jobs import cancel_job, submit_job

from bench.common import lateness_summary

HANDLER = "bench.seconds_start"
EXPRESSION = "*/5 * * * * *"
WITHIN_MS = 50.0
OWNER = "bench"

_lock = threading.Lock()
_entered: dict[str, float] = {}  # execution id -> wall time the handler was entered


@handler(HANDLER, in_process=True)
def seconds_start(ctx: JobContext) -> Any:
    entered = time.time()
    with _lock:
        _entered[ctx.execution_id] = entered
    return None


def announced(ports: Ports) -> set[str]:
    """The handler names the default class's workers announce now."""
    return set(ports.store.announced_handlers("default", int(time.time() * 1000)))


def measure(seconds: float = 120, backend: str = SQLITE, workers: int = 4) -> dict[str, Any]:
    """Run a `*/5 * * * * *` job for `seconds` on `duetime local` and return each start's lateness figures."""
    _entered.clear()
    with tempfile.TemporaryDirectory(prefix="duetime-bench-seconds-") as data_dir:
        system = LocalSystem(Path(data_dir), port=0, workers=workers, backend=backend, reset=True).start()
        ports = system.ports
        assert ports is not None
        name = HANDLER if backend == SQLITE else "demo.echo"
        try:
            while backend == SQLITE and HANDLER not in announced(ports):
                time.sleep(0.05)
            spec = JobSpec.model_validate({"name": "every-5s", "handler": name, "schedule": {"cron": EXPRESSION}})
            job, _ = submit_job(ports, OWNER, spec)
            time.sleep(seconds)
            cancel_job(ports, OWNER, job.job_id)
            time.sleep(1)  # the last completion is written
            rows = ports.store.executions_of_job(job.job_id, limit=1000)
        finally:
            system.stop()
    ran = [r for r in rows if r.status == ExecutionStatus.SUCCEEDED and r.started_at is not None]
    claimed = [(r.started_at - r.scheduled_at).total_seconds() * 1000 for r in ran if r.started_at]
    with _lock:
        noted = {r.execution_id: _entered[r.execution_id] for r in ran if r.execution_id in _entered}
    entered = [(noted[r.execution_id] - r.scheduled_at.timestamp()) * 1000 for r in ran if r.execution_id in noted]
    return {
        "name": f"a {EXPRESSION} job on duetime local ({backend}), {seconds:g} s",
        "backend": backend,
        "seconds": seconds,
        "runs": len(ran),
        "skipped": sum(1 for r in rows if r.status == ExecutionStatus.SKIPPED),
        "notFirstAttempt": sum(1 for r in ran if r.attempt != 1),
        "claimed": lateness_summary(claimed),
        "handler": lateness_summary(entered),
        "handlerRuns": len(entered),
        f"claimedWithin{WITHIN_MS:g}Ms": sum(1 for late in claimed if 0 <= late <= WITHIN_MS),
        f"handlerWithin{WITHIN_MS:g}Ms": sum(1 for late in entered if 0 <= late <= WITHIN_MS),
        "measuredAt": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def render(result: dict[str, Any]) -> str:
    claimed, entered = result["claimed"], result["handler"]
    within = f"{WITHIN_MS:g}Ms"
    lines = [
        result["name"],
        f"  runs {result['runs']} (skipped {result['skipped']}, not first attempt {result['notFirstAttempt']})",
        f"  claimed - slot  p50 {claimed['p50Ms']} ms, p95 {claimed['p95Ms']} ms, p99 {claimed['p99Ms']} ms, "
        f"max {claimed['maxMs']} ms; within {WITHIN_MS:g} ms: {result['claimedWithin' + within]}/{result['runs']}",
    ]
    if result["handlerRuns"]:
        lines.append(
            f"  handler - slot  p50 {entered['p50Ms']} ms, p95 {entered['p95Ms']} ms, p99 {entered['p99Ms']} ms, "
            f"max {entered['maxMs']} ms; within {WITHIN_MS:g} ms: {result['handlerWithin' + within]}/"
            f"{result['handlerRuns']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.seconds", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120, help="how long the job runs (default 120)")
    parser.add_argument("--backend", choices=(SQLITE, MOTO), default=SQLITE)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.seconds, args.backend)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
