"""The built-in handlers docs/jobs.md lists, available everywhere: demo.echo, demo.sleep, demo.fail, demo.count.

They run in the worker's process (they are quick, or sleep on the cancel flag), so every worker serves
them without starting a child process (definitions.BUILTIN_HANDLERS lists them for the API)."""

from __future__ import annotations

from typing import Any

from duetime.worker.handler_api import JobContext, PermanentFailure, handler


@handler("demo.echo", in_process=True)
def echo(ctx: JobContext) -> Any:
    """Succeeds at once; the result is the payload."""
    return ctx.payload


@handler("demo.sleep", in_process=True)
def sleep(ctx: JobContext) -> Any:
    """Sleeps `payload.seconds` (heartbeats continue meanwhile); stops early if told to."""
    seconds = float(ctx.payload.get("seconds", 1))
    if not ctx.sleep(seconds):
        raise InterruptedError(f"stopped before {seconds} s were up")
    return {"slept": seconds}


@handler("demo.fail", in_process=True)
def fail(ctx: JobContext) -> Any:
    """Fails its first `payload.times` attempts (permanently if `payload.permanent`), then succeeds."""
    times = int(ctx.payload.get("times", 1))
    if ctx.attempt <= times:
        message = f"demo.fail: attempt {ctx.attempt} of the first {times} fails"
        if ctx.payload.get("permanent"):
            raise PermanentFailure(message)
        raise RuntimeError(message)
    return {"succeededOnAttempt": ctx.attempt}


@handler("demo.count", in_process=True)
def count(ctx: JobContext) -> Any:
    """Counts to `payload.to` (default 10), one every `payload.every` seconds (default 1), checkpointing
    each count; an attempt resumes from the last checkpoint. Attempt 1 fails at `payload.failAt`, if given
    (so a retry shows the resumption). The result says where this attempt started: `resumedFrom`."""
    to, every = int(ctx.payload.get("to", 10)), float(ctx.payload.get("every", 1))
    fail_at = ctx.payload.get("failAt")
    last = ctx.last_checkpoint
    start = int(last["count"]) if isinstance(last, dict) and isinstance(last.get("count"), int) else 0
    counted = start
    while counted < to:
        if not ctx.sleep(every):
            raise InterruptedError(f"stopped at {counted} of {to}")
        counted += 1
        ctx.checkpoint({"count": counted})
        if ctx.attempt == 1 and counted == fail_at:
            raise RuntimeError(f"demo.count: attempt 1 fails at {counted}, as asked")
    return {"count": counted, "resumedFrom": start, "attempt": ctx.attempt}
