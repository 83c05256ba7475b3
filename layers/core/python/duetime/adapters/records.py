"""What both store adapters write alike: a job's and an execution's fields as plain values, every time in whole
milliseconds, and the domain objects read back from them.

The DynamoDB item (adapters/aws/items.py) and the SQLite row (adapters/sqlite/items.py) each add what only their
store has (keys, index attributes, TTL, how a result is held) around these values, so a field added to a job or an
execution is written and read in one place for both."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime.definitions import DEFAULT_JOB_CLASS
from duetime.domain.checkpoints import checkpoint_attributes, decode_checkpoint
from duetime.domain.keys import ExecutionId
from duetime.domain.models import AttemptRecord, Execution, ExecutionStatus, Job, Overlap, from_ms, to_ms


def ms_or_none(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def time_or_none(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


# --- jobs ----------------------------------------------------------------------------------------


def created_key(job: Job) -> str:
    """The byOwner sort key: creation time then id, so an owner's jobs list oldest first."""
    return f"{to_ms(job.created_at):013d}#{job.job_id}"


def job_identity(job: Job) -> dict[str, Any]:
    """The job's identity and lifecycle beside its definition: whose, what state, which version, when."""
    return {
        "jobId": job.job_id,
        "owner": job.owner,
        "status": job.status.value,
        "version": job.version,
        "createdMs": to_ms(job.created_at),
        "updatedMs": to_ms(job.updated_at),
    }


def job_from_values(definition: dict[str, Any], values: dict[str, Any]) -> Job:
    """The job of a stored `definition` (its spec as the API shows it) and its stored identity `values`."""
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


def attempt_values(record: AttemptRecord) -> dict[str, Any]:
    return {
        "workerId": record.worker_id,
        "startedMs": to_ms(record.started_at),
        "finishedMs": ms_or_none(record.finished_at),
        "outcome": record.outcome,
        "error": record.error,
    }


def execution_values(execution: Execution) -> dict[str, Any]:
    """Every field of `execution` but its result, payload and attempts, which each store holds its own way."""
    return {
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "scheduledMs": to_ms(execution.scheduled_at),
        "dueMs": to_ms(execution.due_at),
        "jobClass": execution.job_class,
        "status": execution.status.value,
        "attempt": execution.attempt,
        "workerId": execution.worker_id,
        "leaseUntilMs": ms_or_none(execution.lease_until),
        "startedMs": ms_or_none(execution.started_at),
        "finishedMs": ms_or_none(execution.finished_at),
        "error": execution.error,
        "skipReason": execution.skip_reason,
        "skippedCount": execution.skipped_count,
        "kind": execution.kind,
        "claimToken": execution.claim_token,
        "runNumber": execution.run_number,
        "retryBase": execution.retry_base or None,  # absent on a row never retried by hand
        "overlap": None if execution.overlap is None else execution.overlap.value,
        "waitedForLimitMs": execution.waited_for_limit_ms,
        "lateMs": ms_or_none(execution.late_at),
        "spreadSeconds": execution.spread_seconds,
        "jobVersion": execution.job_version,
        **checkpoint_attributes(execution),
    }


def execution_from_values(v: dict[str, Any]) -> Execution:
    """The execution of stored values, its `result` and `payload` already decoded (None where absent)."""
    attempts = [
        AttemptRecord(
            attempt=i + 1,
            worker_id=str(a.get("workerId", "")),
            started_at=from_ms(int(a["startedMs"])),
            finished_at=time_or_none(a.get("finishedMs")),
            outcome=a.get("outcome"),
            error=a.get("error"),
        )
        for i, a in enumerate(v.get("attempts") or [])
    ]
    return Execution(
        execution_id=v["executionId"],
        job_id=v.get("jobId") or ExecutionId.parse(v["executionId"]).job_id,  # a plain run's row on DynamoDB has none
        scheduled_at=from_ms(int(v["scheduledMs"])),
        due_at=from_ms(int(v["dueMs"])),
        job_class=v.get("jobClass", DEFAULT_JOB_CLASS),
        status=ExecutionStatus(v["status"]),
        attempt=int(v.get("attempt", 0)),
        worker_id=v.get("workerId"),
        lease_until=time_or_none(v.get("leaseUntilMs")),
        started_at=time_or_none(v.get("startedMs")),
        finished_at=time_or_none(v.get("finishedMs")),
        result=v.get("result"),
        error=v.get("error"),
        skip_reason=v.get("skipReason"),
        skipped_count=None if v.get("skippedCount") is None else int(v["skippedCount"]),
        kind=v.get("kind", "scheduled"),
        attempts=attempts,
        payload=v.get("payload"),
        run_number=None if v.get("runNumber") is None else int(v["runNumber"]),
        claim_token=v.get("claimToken"),
        retry_base=int(v.get("retryBase") or 0),
        overlap=None if v.get("overlap") is None else Overlap(v["overlap"]),
        waited_for_limit_ms=None if v.get("waitedForLimitMs") is None else int(v["waitedForLimitMs"]),
        checkpoint=decode_checkpoint(v.get("checkpoint"), v.get("checkpointAttempt"), v.get("checkpointMs")),
        late_at=time_or_none(v.get("lateMs")),
        spread_seconds=None if v.get("spreadSeconds") is None else int(v["spreadSeconds"]),
        job_version=None if v.get("jobVersion") is None else int(v["jobVersion"]),
    )
