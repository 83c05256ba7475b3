"""Handlers that record every run they make, for the e2e tests that prove no attempt runs twice.

`record.echo`, `record.sleep` and `record.fail` behave as the built-in `demo.*` handlers of the same name and
append one JSON line per invocation to the file the test names in RUN_LOG_ENV: execution id, attempt, the
worker's id, when the run started and ended (epoch ms), and how it ended (`succeeded`, `failed`, or `lost`
when the worker told it to stop: its lease was lost or handed back, or its timeout came). A worker loads them
as a user loads a project's handlers: `duetime local --handlers tests.e2e.recording` or `duetime worker
--handlers ...`, with the repository root importable. A run whose worker is killed writes no line; a
heartbeat refused just as the handler returned is only in the worker's log (test_chaos reads it there).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duetime import JobContext, handler
from duetime.definitions import DEFAULT_JOB_CLASS
from duetime.service.context import Ports
from duetime.service.handlers import served_handlers
from duetime.worker import demo

# The variable the test sets in a worker's environment: the file every run is appended to.
RUN_LOG_ENV = "DUETIME_TEST_RUN_LOG"
MODULE = __name__
HANDLERS = frozenset({"record.echo", "record.sleep", "record.fail"})
ROOT = Path(__file__).resolve().parents[2]


def worker_environment(run_log: Path) -> dict[str, str]:
    """The environment of a `duetime` process that loads this module and records its runs to `run_log`: the
    repository root importable (for `tests`) and this worktree's duetime first."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "layers" / "core" / "python")])
    return {**os.environ, "PYTHONPATH": path, RUN_LOG_ENV: str(run_log)}


_lock = threading.Lock()  # one worker process runs many handlers at once: their lines must not interleave


def _recorded(run: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
    """`run`, appending a line for each invocation once it ends (flushed at once, so a later kill loses none)."""

    def recorded(ctx: JobContext) -> Any:
        started = time.time()
        outcome = "failed"
        try:
            result = run(ctx)
            outcome = "succeeded"
            return result
        finally:
            if ctx.cancelled.is_set():
                outcome = "lost"  # told to stop: whatever it returned, the worker no longer reports it
            record = {
                "execution_id": ctx.execution_id,
                "attempt": ctx.attempt,
                "worker_id": ctx.worker_id,
                "started_ms": int(started * 1000),
                "ended_ms": int(time.time() * 1000),
                "outcome": outcome,
            }
            line = json.dumps(record, separators=(",", ":")) + "\n"
            with _lock, open(os.environ[RUN_LOG_ENV], "a", encoding="utf-8") as out:
                out.write(line)

    return recorded


# In process, as the demo handlers run: a child process would be killed, not told, when its lease is lost.
handler("record.echo", in_process=True)(_recorded(demo.echo))
handler("record.sleep", in_process=True)(_recorded(demo.sleep))
handler("record.fail", in_process=True)(_recorded(demo.fail))


def served(ports: Ports) -> bool:
    """True once a live worker announced these handlers: the API accepts jobs naming them from then on."""
    return served_handlers(ports, DEFAULT_JOB_CLASS) >= HANDLERS


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Every run recorded in `path`; it must exist and hold some (a check on no runs could not fail)."""
    assert path.exists(), f"{path}: no worker recorded a run, so nothing about runs could be checked"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert records, f"{path} is empty"
    return records
