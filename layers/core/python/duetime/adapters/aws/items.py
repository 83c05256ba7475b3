"""DynamoDB item shapes of jobs and executions: the only place their attribute names are known."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from duetime.definitions import DEFAULT_JOB_CLASS
from duetime.domain.checkpoints import checkpoint_attributes, decode_checkpoint
from duetime.domain.keys import ExecutionKey, open_index_key
from duetime.domain.models import AttemptRecord, Execution, ExecutionStatus, Job, JobSpec, Overlap, from_ms, to_ms
from duetime.domain.results import stored_json

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _ser(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def _deser(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB numbers as ints (every number duetime stores in control records is whole)."""
    return {k: int(v) if isinstance(v, Decimal) else v for k, v in values.items()}


def _ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def _opt_time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


# --- jobs ----------------------------------------------------------------------------------------


def job_to_item(job: Job) -> dict[str, Any]:
    spec = JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
    return {
        "jobId": job.job_id,
        "owner": job.owner,
        "createdKey": f"{to_ms(job.created_at):013d}#{job.job_id}",
        "status": job.status.value,
        "version": job.version,
        "createdMs": to_ms(job.created_at),
        "updatedMs": to_ms(job.updated_at),
        "definition": spec.model_dump_json(by_alias=True),
        "ownerGroups": list(job.owner_groups) or None,
        # Top-level copies of what GET /jobs filters on, for the byOwner query's FilterExpression.
        "handler": job.handler,
        "tags": dict(job.tags) or None,
        "note": job.note,
    }


def job_from_item(item: dict[str, Any]) -> Job:
    values = _deser(item)
    definition = json.loads(values["definition"])
    return Job.model_validate(
        {
            **definition,
            "jobId": values["jobId"],
            "owner": values["owner"],
            "status": values["status"],
            "version": int(values["version"]),
            "createdAt": from_ms(int(values["createdMs"])),
            "updatedAt": from_ms(int(values["updatedMs"])),
            "ownerGroups": list(values.get("ownerGroups") or []),
            "note": values.get("note"),
        }
    )


# --- executions ------------------------------------------------------------------------------------


def execution_key(execution: Execution, shards: int) -> ExecutionKey:
    return ExecutionKey.for_due(execution.job_id, execution.execution_id, execution.due_at, shards)


def _attempt_to_item(record: AttemptRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in {
            "workerId": record.worker_id,
            "startedMs": to_ms(record.started_at),
            "finishedMs": _ms(record.finished_at),
            "outcome": record.outcome,
            "error": record.error,
        }.items()
        if v is not None
    }


def execution_to_item(execution: Execution, key: ExecutionKey, expires_at: int | None = None) -> dict[str, Any]:
    """The item of `execution` stored at `key` (the store derives it from the due bucket's shard count)."""
    return {
        "pk": key.pk,
        "sk": key.sk,
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "scheduledMs": to_ms(execution.scheduled_at),
        "dueMs": to_ms(execution.due_at),
        "jobClass": execution.job_class,
        "status": execution.status.value,
        "attempt": execution.attempt,
        "workerId": execution.worker_id,
        "leaseUntilMs": _ms(execution.lease_until),
        "startedMs": _ms(execution.started_at),
        "finishedMs": _ms(execution.finished_at),
        "result": None if execution.result is None else stored_json(execution.result),
        "error": execution.error,
        "skipReason": execution.skip_reason,
        "skippedCount": execution.skipped_count,
        "kind": execution.kind,
        "attempts": [_attempt_to_item(a) for a in execution.attempts],
        "expiresAt": expires_at,
        "openShard": None if execution.status.is_terminal else open_shard_of(key),
        "openJob": None if execution.status.is_terminal else execution.job_id,
        "payload": None if execution.payload is None else stored_json(execution.payload),
        "runNumber": execution.run_number,
        "claimToken": execution.claim_token,
        "retryBase": execution.retry_base or None,  # absent on a row never retried by hand
        "overlap": None if execution.overlap is None else execution.overlap.value,
        "waitedForLimitMs": execution.waited_for_limit_ms,
        "lateMs": _ms(execution.late_at),
        **checkpoint_attributes(execution),
    }


def open_shard_of(key: ExecutionKey) -> str:
    """The `open` index partition of a row (`shard#spread`, domain.keys.open_index_key)."""
    return open_index_key(key)


def execution_from_item(item: dict[str, Any]) -> Execution:
    v = _deser(item)
    attempts = [
        AttemptRecord(
            attempt=i + 1,
            worker_id=str(a.get("workerId", "")),
            started_at=from_ms(int(a["startedMs"])),
            finished_at=_opt_time(a.get("finishedMs")),
            outcome=a.get("outcome"),
            error=a.get("error"),
        )
        for i, a in enumerate(v.get("attempts") or [])
    ]
    return Execution(
        execution_id=v["executionId"],
        job_id=v["jobId"],
        scheduled_at=from_ms(int(v["scheduledMs"])),
        due_at=from_ms(int(v["dueMs"])),
        job_class=v.get("jobClass", DEFAULT_JOB_CLASS),
        status=ExecutionStatus(v["status"]),
        attempt=int(v.get("attempt", 0)),
        worker_id=v.get("workerId"),
        lease_until=_opt_time(v.get("leaseUntilMs")),
        started_at=_opt_time(v.get("startedMs")),
        finished_at=_opt_time(v.get("finishedMs")),
        result=None if v.get("result") is None else json.loads(v["result"]),
        error=v.get("error"),
        skip_reason=v.get("skipReason"),
        skipped_count=None if v.get("skippedCount") is None else int(v["skippedCount"]),
        kind=v.get("kind", "scheduled"),
        attempts=attempts,
        payload=None if v.get("payload") is None else json.loads(v["payload"]),
        run_number=None if v.get("runNumber") is None else int(v["runNumber"]),
        claim_token=v.get("claimToken"),
        retry_base=int(v.get("retryBase") or 0),
        overlap=None if v.get("overlap") is None else Overlap(v["overlap"]),
        waited_for_limit_ms=None if v.get("waitedForLimitMs") is None else int(v["waitedForLimitMs"]),
        checkpoint=decode_checkpoint(v.get("checkpoint"), v.get("checkpointAttempt"), v.get("checkpointMs")),
        late_at=_opt_time(v.get("lateMs")),
    )
