"""A counting handler that checkpoints, run in a child process (imported there by name, as a team's is)."""

from __future__ import annotations

from typing import Any

from duetime import JobContext, handler


@handler("sample.count_in_child")
def count_in_child(ctx: JobContext) -> Any:
    """demo.count's logic in a child process: counts to `payload.to`, checkpointing each count; attempt 1
    fails at `payload.failAt`. The result says where this attempt started."""
    last = ctx.last_checkpoint
    start = int(last["count"]) if isinstance(last, dict) else 0
    counted = start
    while counted < int(ctx.payload["to"]):
        counted += 1
        ctx.checkpoint({"count": counted})
        if ctx.attempt == 1 and counted == ctx.payload.get("failAt"):
            raise RuntimeError(f"attempt 1 fails at {counted}")
    return {"count": counted, "resumedFrom": start, "attempt": ctx.attempt}
