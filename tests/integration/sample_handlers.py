"""Handlers the worker tests run; a child process imports this module by name, as it would a team's."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from duetime import JobContext, handler


def _record_run(ctx: JobContext) -> Path:
    """Append this run to `payload.dir`/runs, one line per run: how tests count runs across processes."""
    folder = Path(ctx.payload["dir"])
    with open(folder / "runs", "a", encoding="utf-8") as out:
        out.write(f"{ctx.attempt} {os.getpid()}\n")
    return folder


@handler("sample.sleep_then_write")
def sleep_then_write(ctx: JobContext) -> Any:
    """The first attempt sleeps `payload.seconds`, then writes a file: past a shorter timeout it must not."""
    folder = _record_run(ctx)
    if ctx.attempt == 1:
        time.sleep(float(ctx.payload["seconds"]))
        (folder / "written-after-sleep").write_text(f"attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


@handler("sample.sleep_recording_span")
def sleep_recording_span(ctx: JobContext) -> Any:
    """Sleep `payload.seconds` in its child process, appending when it started and ended to `payload.dir`/spans."""
    started = time.time()
    time.sleep(float(ctx.payload["seconds"]))
    with open(Path(ctx.payload["dir"]) / "spans", "a", encoding="utf-8") as out:
        out.write(f"{started} {time.time()}\n")
    return None


@handler("sample.returns_datetime")
def returns_datetime(ctx: JobContext) -> Any:
    _record_run(ctx)
    return {"at": datetime.now(UTC)}


@handler("sample.returns_datetime_in_process", in_process=True)
def returns_datetime_in_process(ctx: JobContext) -> Any:
    _record_run(ctx)
    return {"at": datetime.now(UTC)}


@handler("sample.returns_megabyte")
def returns_megabyte(ctx: JobContext) -> Any:
    _record_run(ctx)
    return {"blob": "x" * 1_000_000}


@handler("sample.prints_and_returns_owner")
def prints_and_returns_owner(ctx: JobContext) -> Any:
    print("a handler's own output goes to stderr, not into its result")
    return {"owner": ctx.owner, "executionId": ctx.execution_id, "inChild": os.getpid() != ctx.payload["parentPid"]}


@handler("sample.long_error", in_process=True)
def long_error(ctx: JobContext) -> Any:
    _record_run(ctx)
    raise RuntimeError("é" * 10_000)


@handler("sample.counted", in_process=True)
def counted(ctx: JobContext) -> Any:
    _record_run(ctx)
    return {"ran": True}


@handler("sample.environment")
def environment(ctx: JobContext) -> Any:
    """The environment the handler's process was given: what a handler can reach of the worker's."""
    return dict(os.environ)


@handler("sample.sleeps_in_process", in_process=True)
def sleeps_in_process(ctx: JobContext) -> Any:
    """Sleeps `payload.seconds` in the worker's own process, deaf to a request to stop (as a handler may be)."""
    time.sleep(float(ctx.payload["seconds"]))
    return {"slept": ctx.payload["seconds"]}
