"""DynamoDB item shapes of jobs and executions: the only place their attribute names are known."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from duetime.adapters.records import (
    attempt_values,
    created_key,
    execution_from_values,
    execution_values,
    job_from_values,
    job_identity,
)
from duetime.domain.history import is_plain
from duetime.domain.job_index import indexed_at_write
from duetime.domain.keys import ExecutionKey, open_index_key
from duetime.domain.models import AttemptRecord, Execution, Job, JobSpec
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


# --- jobs ----------------------------------------------------------------------------------------


def job_to_item(job: Job) -> dict[str, Any]:
    spec = JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
    return {
        **job_identity(job),
        "createdKey": created_key(job),
        "definition": spec.model_dump_json(by_alias=True),
        "ownerGroups": list(job.owner_groups) or None,
        # Top-level copies of what GET /jobs filters on, for the byOwner query's FilterExpression.
        "handler": job.handler,
        "tags": dict(job.tags) or None,
        "note": job.note,
    }


def job_from_item(item: dict[str, Any]) -> Job:
    values = _deser(item)
    return job_from_values(json.loads(values["definition"]), values)


# --- executions ------------------------------------------------------------------------------------


def execution_key(execution: Execution, shards: int) -> ExecutionKey:
    return ExecutionKey.for_due(execution.job_id, execution.execution_id, execution.due_at, shards)


def _attempt_to_item(record: AttemptRecord) -> dict[str, Any]:
    return {k: v for k, v in attempt_values(record).items() if v is not None}


def execution_to_item(
    execution: Execution, key: ExecutionKey, expires_at: int | None = None, in_open_index: bool = True
) -> dict[str, Any]:
    """The item of `execution` stored at `key` (the store derives it from the due bucket's shard count), in
    the `open` index if it is open and `in_open_index` (DynamoTables._indexed_at_create), in `openByJob`
    if it is open and either that or its kind says so (domain/job_index.py: not a plain run of its schedule),
    and in byJob unless it is a plain run whose key follows from its slot (domain/history.py)."""
    is_open = not execution.status.is_terminal
    by_job = is_open and (in_open_index or indexed_at_write(execution))
    spread = execution.spread_seconds
    return {
        "pk": key.pk,
        "sk": key.sk,
        **execution_values(execution),
        # byJob is keyed by jobId: a plain run found by its slot's key has no entry (domain/history.py).
        "jobId": None if spread is not None and is_plain(execution, spread) else execution.job_id,
        "result": None if execution.result is None else stored_json(execution.result),
        "attempts": [_attempt_to_item(a) for a in execution.attempts],
        "expiresAt": expires_at,
        "openShard": open_shard_of(key) if in_open_index and is_open else None,
        "openJob": execution.job_id if by_job else None,
        "payload": None if execution.payload is None else stored_json(execution.payload),
    }


def open_shard_of(key: ExecutionKey) -> str:
    """The `open` index partition of a row (`shard#spread`, domain.keys.open_index_key)."""
    return open_index_key(key)


def execution_from_item(item: dict[str, Any]) -> Execution:
    v = _deser(item)
    for held_as_json in ("result", "payload"):
        if v.get(held_as_json) is not None:
            v[held_as_json] = json.loads(v[held_as_json])
    return execution_from_values(v)
