"""A handler for the checkpoint e2e test, loaded by `duetime worker --handlers tests.e2e.checkpoint_handlers`:
demo.count that also tells the test how to act as its attempt's worker over HTTP (the claim's id and token,
as a Lambda target or an ECS task is told them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from duetime import JobContext, handler
from duetime.worker.demo import count


@handler("e2e.count_and_tell", in_process=True)
def count_and_tell(ctx: JobContext) -> Any:
    """Writes `payload.dir`/attempt-N.json with the attempt's workerId and claimToken, then counts as demo.count."""
    claim = {"attempt": ctx.attempt, "workerId": ctx.worker_id, "claimToken": ctx.claim_token}
    (Path(ctx.payload["dir"]) / f"attempt-{ctx.attempt}.json").write_text(json.dumps(claim))
    return count(ctx)
