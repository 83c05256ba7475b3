"""`duetime smoke`'s `lambda:` target: sleeps the seconds its run's payload asks for, then returns them with
its request id. It logs one line per invocation, naming the run (executionId, attempt) and its request id,
so the smoke test counts how often one run invoked it (the worker's target client must never invoke it twice:
issue 29, defect 2). Standard library only: it needs no layer and calls nothing."""

from __future__ import annotations

import json
import time
from typing import Any

# Well below the function's timeout (infra/smoke_target.py): a sleep asked for longer is cut to this.
MAX_SECONDS = 90.0


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    given = event.get("payload")
    payload: dict[str, Any] = given if isinstance(given, dict) else {}
    try:
        seconds = min(max(float(payload.get("seconds", 0)), 0.0), MAX_SECONDS)
    except (TypeError, ValueError):
        seconds = 0.0
    print(
        json.dumps(
            {
                "smokeTarget": "invoked",
                "executionId": event.get("executionId"),
                "attempt": event.get("attempt"),
                "requestId": context.aws_request_id,
                "seconds": seconds,
            }
        ),
        flush=True,
    )
    time.sleep(seconds)
    return {"slept": seconds, "requestId": context.aws_request_id}
