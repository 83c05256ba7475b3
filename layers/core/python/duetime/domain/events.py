"""duetime's events: one per terminal run and per job state change, in the schema docs/events.md documents.

Plain values built from a run or a job, no I/O: EventBridge on AWS, the console and a webhook locally, carry
them as they are. An event never holds the job's payload or a run's result, only what they are and how big."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from duetime.domain.models import Execution, ExecutionStatus, Job, format_time, to_ms

EVENT_SOURCE = "duetime"
EVENT_VERSION = "1"  # detail.version: a field is only ever added within one version
# A run's error in an event is cut to this many characters (the full text stays on the execution).
MAX_EVENT_ERROR_CHARS = 512


class JobChange(StrEnum):
    """A job's state changes, each an event whose detail-type is `Job <Change>`."""

    CREATED = "Created"
    EDITED = "Edited"
    PAUSED = "Paused"
    AUTO_PAUSED = "Auto-Paused"
    RESUMED = "Resumed"
    CANCELLED = "Cancelled"
    COMPLETED = "Completed"
    REOPENED = "Reopened"  # a completed one-off job whose run was retried: active until that run ends


# A terminal run's detail-type by its status.
RUN_DETAIL_TYPES = {
    ExecutionStatus.SUCCEEDED: "Execution Succeeded",
    ExecutionStatus.FAILED: "Execution Failed",
    ExecutionStatus.SKIPPED: "Execution Skipped",
}
JOB_DETAIL_TYPES = {change: f"Job {change.value}" for change in JobChange}
# A run found past its job's lateAfterSeconds (service/lateness.py): not an end, announced once a run.
LATE_DETAIL_TYPE = "Execution Late"
DETAIL_TYPES = (*RUN_DETAIL_TYPES.values(), LATE_DETAIL_TYPE, *JOB_DETAIL_TYPES.values())


@dataclass(frozen=True)
class Event:
    """One event: its detail-type, the instant it happened and its detail (a JSON object)."""

    detail_type: str
    time: datetime
    detail: dict[str, Any]

    @property
    def owner(self) -> str:
        return str(self.detail.get("owner") or "")

    def envelope(self) -> dict[str, Any]:
        """The event as EventBridge delivers it to a rule's target (and the local webhook receives it)."""
        return {
            "version": "0",
            "source": EVENT_SOURCE,
            "detail-type": self.detail_type,
            "time": format_time(self.time),
            "detail": self.detail,
        }


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def result_summary(result: Any) -> dict[str, Any] | None:
    """What a result is, never what it holds: its JSON type and size in bytes."""
    if result is None:
        return None
    kind = {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(result), "number")
    return {"type": kind, "bytes": len(json.dumps(result, separators=(",", ":"), default=str).encode())}


def run_event(execution: Execution, job: Job | None) -> Event | None:
    """The event of a run that ended (succeeded, failed for good or skipped); None for any other status."""
    detail_type = RUN_DETAIL_TYPES.get(execution.status)
    if detail_type is None:
        return None
    lateness = None
    if execution.started_at is not None:
        lateness = to_ms(execution.started_at) - to_ms(execution.due_at)
    error = execution.error[:MAX_EVENT_ERROR_CHARS] if execution.error else None
    detail: dict[str, Any] = {
        "version": EVENT_VERSION,
        "owner": job.owner if job else None,
        "jobId": execution.job_id,
        "jobName": job.name if job else None,
        "executionId": execution.execution_id,
        "status": execution.status.value,
        "kind": execution.kind,
        "attempt": execution.attempt,
        "scheduledAt": _time(execution.scheduled_at),
        "dueAt": _time(execution.due_at),
        "startedAt": _time(execution.started_at),
        "finishedAt": _time(execution.finished_at),
        "latenessMs": lateness,
        "error": error,
        "skipReason": execution.skip_reason,
        "result": result_summary(execution.result),
    }
    return Event(detail_type, execution.finished_at or execution.due_at, detail)


def late_event(execution: Execution, job: Job, at: datetime) -> Event:
    """The event of a run found past its job's lateness budget at `at`: still waiting (startedAt null) or
    starting late (startedAt its claim); latenessMs is how far past its dueAt it was then."""
    started = execution.started_at if execution.status != ExecutionStatus.SCHEDULED else None
    detail: dict[str, Any] = {
        "version": EVENT_VERSION,
        "owner": job.owner,
        "jobId": execution.job_id,
        "jobName": job.name,
        "executionId": execution.execution_id,
        "status": execution.status.value,
        "kind": execution.kind,
        "scheduledAt": _time(execution.scheduled_at),
        "dueAt": _time(execution.due_at),
        "startedAt": _time(started),
        "lateAfterSeconds": job.late_after_seconds,
        "latenessMs": to_ms(started or at) - to_ms(execution.due_at),
    }
    return Event(LATE_DETAIL_TYPE, at, detail)


def job_event(job: Job, change: JobChange, at: datetime) -> Event:
    """The event of a job's state change (its status, version and note as they are after it)."""
    detail: dict[str, Any] = {
        "version": EVENT_VERSION,
        "owner": job.owner,
        "jobId": job.job_id,
        "jobName": job.name,
        "change": change.value,
        "status": job.status.value,
        "jobVersion": job.version,
        "handler": job.handler,
        "jobClass": job.job_class,
        "note": job.note,
    }
    return Event(JOB_DETAIL_TYPES[change], at, detail)
