"""Issue 20's pacing figure: runs due in one second on a rate limit, how close to the limit they start.

`duetime local` on SQLite in this process (two workers of the default class sharing the limit), one-off
jobs submitted through the service, all due at one instant; a handler in the workers' process notes the
wall time of each start."""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime import JobContext, handler
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.local.system import LocalSystem
from duetime.service import limits
from duetime.service.jobs import submit_job
from duetime.worker.runtime import Worker

_lock = threading.Lock()
_starts: list[float] = []
HANDLER = "bench.paced_start"


@handler(HANDLER, in_process=True)
def paced_start(ctx: JobContext) -> Any:
    with _lock:
        _starts.append(time.time())
    return None


def measure(runs: int = 1000, per_second: float = 50, burst: int = 5, workers: int = 16) -> dict[str, Any]:
    """Submit `runs` one-off jobs due in one second on a limit of `per_second` (burst `burst`); wait for them
    all; the achieved start rate, the most starts in one calendar second and how many did not succeed first
    time."""
    _starts.clear()
    with tempfile.TemporaryDirectory() as data_dir:
        system = LocalSystem(Path(data_dir), port=0, workers=workers, backend="sqlite", reset=True).start()
        ports = system.ports
        assert ports is not None
        second = Worker(ports, "default", "bench-second-worker", workers)
        thread = threading.Thread(target=second.run, kwargs={"grace_seconds": 1}, daemon=True)
        thread.start()
        try:
            while HANDLER not in ports.store.announced_handlers("default", int(time.time() * 1000)):
                time.sleep(0.05)
            limits.put_limit(ports, "bench", "partner-api", per_second, burst, None)
            due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2 + runs // 250)
            jobs = []
            for i in range(runs):
                body = {"name": f"paced-{i}", "handler": HANDLER, "schedule": {"at": format_time(due)}}
                spec = JobSpec.model_validate({**body, "rateLimit": "partner-api", "retry": {"maxAttempts": 1}})
                jobs.append(submit_job(ports, "bench", spec)[0])
            deadline = time.monotonic() + runs / per_second * 2 + 60
            while len(_starts) < runs and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)  # the last completions are written
            rows = [ports.store.executions_of_job(job.job_id)[0] for job in jobs]
        finally:
            second.stopping.set()
            thread.join(15)
            system.stop()
    starts = sorted(_starts)
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    per_calendar_second = Counter(int(s) for s in starts)
    waited = sorted(r.waited_for_limit_ms or 0 for r in rows)
    return {
        "name": f"{runs} runs due in one second on a {per_second:g}/s limit (burst {burst})",
        "runs": runs,
        "started": len(starts),
        "notFirstTimeSuccess": sum(1 for r in rows if r.status != ExecutionStatus.SUCCEEDED or r.attempt != 1),
        "limitPerSecond": per_second,
        "burst": burst,
        # The steady rate between the burst and the last start (the burst's burst+1 starts come at once).
        "achievedPerSecond": round((len(starts) - burst - 1) / span, 2) if span else None,
        "maxInOneSecond": max(per_calendar_second.values()) if starts else 0,
        "spanSeconds": round(span, 2),
        "waitedForLimitMaxMs": waited[-1] if waited else 0,
    }
