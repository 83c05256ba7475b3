"""Rows of the SQLite store: the domain objects as JSON, every time in whole milliseconds like the DynamoDB
items (adapters/aws/items.py)."""

from __future__ import annotations

import json

from duetime.adapters.records import (
    attempt_values,
    execution_from_values,
    execution_values,
    job_from_values,
    job_identity,
)
from duetime.domain.models import Execution, Job, JobSpec

_SPEC_FIELDS = set(JobSpec.model_fields)


def job_to_doc(job: Job) -> str:
    """The job as JSON: its definition as the API shows it, and its identity and lifecycle."""
    definition = job.model_dump_json(by_alias=True, include=_SPEC_FIELDS)
    identity = json.dumps(
        {**job_identity(job), "ownerGroups": list(job.owner_groups), "note": job.note}, separators=(",", ":")
    )
    return '{"definition":' + definition + "," + identity[1:]


def job_from_doc(doc: str) -> Job:
    v = json.loads(doc)
    return job_from_values(v["definition"], v)


def execution_to_doc(execution: Execution, notified_ms: int | None = None) -> str:
    return json.dumps(
        {
            **execution_values(execution),
            "result": execution.result,
            "attempts": [attempt_values(a) for a in execution.attempts],
            "notifiedMs": notified_ms,
            "payload": execution.payload,
        },
        separators=(",", ":"),
    )


def execution_from_doc(doc: str) -> Execution:
    return execution_from_values(json.loads(doc))
