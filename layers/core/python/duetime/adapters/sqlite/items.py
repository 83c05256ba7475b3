"""Rows of the SQLite store: the domain objects as JSON, every time in whole milliseconds like the DynamoDB
items (adapters/aws/items.py)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from duetime.domain.checkpoints import checkpoint_attributes, decode_checkpoint
from duetime.domain.models import AttemptRecord, Execution, ExecutionStatus, Job, JobSpec, Overlap, from_ms, to_ms

_SPEC_FIELDS = set(JobSpec.model_fields)


def _ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def _time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


def job_to_doc(job: Job) -> str:
    """The job as JSON: its definition as the API shows it, and its identity and lifecycle."""
    definition = job.model_dump_json(by_alias=True, include=_SPEC_FIELDS)
    identity = json.dumps(
        {
            "jobId": job.job_id,
            "owner": job.owner,
            "status": job.status.value,
            "version": job.version,
            "createdMs": to_ms(job.created_at),
            "updatedMs": to_ms(job.updated_at),
            "ownerGroups": list(job.owner_groups),
            "note": job.note,
        },
        separators=(",", ":"),
    )
    return '{"definition":' + definition + "," + identity[1:]


def job_from_doc(doc: str) -> Job:
    v = json.loads(doc)
    return Job.model_validate(
        {
            **v["definition"],
            "jobId": v["jobId"],
            "owner": v["owner"],
            "status": v["status"],
            "version": int(v["version"]),
            "createdAt": from_ms(int(v["createdMs"])),
            "updatedAt": from_ms(int(v["updatedMs"])),
            "owner_groups": list(v.get("ownerGroups") or []),
            "note": v.get("note"),
        }
    )


def created_key(job: Job) -> str:
    return f"{to_ms(job.created_at):013d}#{job.job_id}"


def execution_to_doc(execution: Execution, notified_ms: int | None = None) -> str:
    return json.dumps(
        {
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
            "result": execution.result,
            "error": execution.error,
            "skipReason": execution.skip_reason,
            "skippedCount": execution.skipped_count,
            "kind": execution.kind,
            "attempts": [
                {
                    "workerId": a.worker_id,
                    "startedMs": to_ms(a.started_at),
                    "finishedMs": _ms(a.finished_at),
                    "outcome": a.outcome,
                    "error": a.error,
                }
                for a in execution.attempts
            ],
            "notifiedMs": notified_ms,
            "claimToken": execution.claim_token,
            "payload": execution.payload,
            "runNumber": execution.run_number,
            "retryBase": execution.retry_base or None,
            "overlap": None if execution.overlap is None else execution.overlap.value,
            "waitedForLimitMs": execution.waited_for_limit_ms,
            "lateMs": _ms(execution.late_at),
            **checkpoint_attributes(execution),
        },
        separators=(",", ":"),
    )


def execution_from_doc(doc: str) -> Execution:
    return execution_from_values(json.loads(doc))


def execution_from_values(v: dict[str, Any]) -> Execution:
    return Execution(
        execution_id=v["executionId"],
        job_id=v["jobId"],
        scheduled_at=from_ms(int(v["scheduledMs"])),
        due_at=from_ms(int(v["dueMs"])),
        job_class=v["jobClass"],
        status=ExecutionStatus(v["status"]),
        attempt=int(v["attempt"]),
        worker_id=v["workerId"],
        lease_until=_time(v["leaseUntilMs"]),
        started_at=_time(v["startedMs"]),
        finished_at=_time(v["finishedMs"]),
        result=v["result"],
        error=v["error"],
        skip_reason=v["skipReason"],
        skipped_count=v["skippedCount"],
        kind=v["kind"],
        attempts=[
            AttemptRecord(
                attempt=i + 1,
                worker_id=a["workerId"],
                started_at=from_ms(int(a["startedMs"])),
                finished_at=_time(a["finishedMs"]),
                outcome=a["outcome"],
                error=a["error"],
            )
            for i, a in enumerate(v["attempts"])
        ],
        claim_token=v.get("claimToken"),
        payload=v.get("payload"),
        run_number=v.get("runNumber"),
        retry_base=int(v.get("retryBase") or 0),
        overlap=None if v.get("overlap") is None else Overlap(v["overlap"]),
        waited_for_limit_ms=v.get("waitedForLimitMs"),
        checkpoint=decode_checkpoint(v.get("checkpoint"), v.get("checkpointAttempt"), v.get("checkpointMs")),
        late_at=_time(v.get("lateMs")),
    )
