"""Inside an `ecs:` task: the run it was started for, its payload read from the jobs table by its job id.

duetime starts the task with references only (DUETIME_EXECUTION_ID, DUETIME_JOB_ID, DUETIME_ATTEMPT,
DUETIME_SCHEDULED_AT, DUETIME_OWNER, DUETIME_PREFIX, DUETIME_REGION; worker.kinds.ecs_task_environment): RunTask's
overrides are readable by anyone who may DescribeTasks and are recorded in CloudTrail, so the payload is never
among them. The task's role may GetItem the jobs table's jobId, owner and definition attributes (infra/permissions.py).

In Python: `from duetime.ecs_task import current_run; run = current_run()`. In any other language:
`python -m duetime.ecs_task` prints the same values as one JSON object.

Checkpoints (ctx.checkpoint) are not available to a task: it is not told its attempt's claim token (the
worker that started it heartbeats for it and stops it when the attempt is lost), and its role may read
the jobs table only, not the execution row that holds the last checkpoint. A task that must resume keeps
its progress in its own store, keyed by DUETIME_EXECUTION_ID (the same on every attempt).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.store import DynamoStore
from duetime.definitions import Settings

VARIABLES = {
    "executionId": "DUETIME_EXECUTION_ID",
    "jobId": "DUETIME_JOB_ID",
    "attempt": "DUETIME_ATTEMPT",
    "scheduledAt": "DUETIME_SCHEDULED_AT",
    "owner": "DUETIME_OWNER",
}


def current_run(environ: Mapping[str, str] | None = None, store: DynamoStore | None = None) -> dict[str, Any]:
    """The run values a `lambda:` target receives (worker.kinds.run_values): executionId, jobId, attempt,
    scheduledAt, owner and the job's payload. Raises LookupError if a variable is missing, or the job is gone
    or belongs to another owner than the task was started for."""
    env = os.environ if environ is None else environ
    missing = [name for name in (*VARIABLES.values(), "DUETIME_PREFIX") if not env.get(name)]
    if missing:
        raise LookupError(f"not started by duetime: {', '.join(missing)} not set")
    values: dict[str, Any] = {key: env[name] for key, name in VARIABLES.items()}
    values["attempt"] = int(values["attempt"])
    if store is None:
        region = env.get("AWS_REGION") or env.get("DUETIME_REGION") or "us-east-1"
        client = make_client("dynamodb", region, env.get("DUETIME_ENDPOINT_URL"))
        store = DynamoStore(client, Settings(prefix=env["DUETIME_PREFIX"]))
    found = store.job_payload(values["jobId"])
    if found is None or found[0] != values["owner"]:
        raise LookupError(f"job {values['jobId']} of {values['owner']!r} not found")
    values["payload"] = found[1]
    return values


def main() -> int:
    try:
        run = current_run()
    except LookupError as exc:
        print(f"duetime: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(run, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
