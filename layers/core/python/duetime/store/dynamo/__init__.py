"""DynamoDB adapters for jobs, executions and control records: one store object over the three tables."""

from __future__ import annotations

from duetime.store.dynamo.base import Refused, is_refused, refused_as
from duetime.store.dynamo.control import DynamoControl
from duetime.store.dynamo.executions import DynamoExecutions
from duetime.store.dynamo.items import (
    _deser,
    _ser,
    execution_from_item,
    execution_key,
    execution_to_item,
    job_from_item,
    job_to_item,
    open_shard_of,
)
from duetime.store.dynamo.jobs import TASK_READABLE_JOB_ATTRIBUTES, DynamoJobs
from duetime.store.dynamo.quotas import DynamoQuotas


class DynamoStore(DynamoJobs, DynamoExecutions, DynamoControl):
    """Jobs, executions and control records in DynamoDB; every state change is a conditional write."""


__all__ = [
    "TASK_READABLE_JOB_ATTRIBUTES",
    "DynamoControl",
    "DynamoExecutions",
    "DynamoJobs",
    "DynamoQuotas",
    "DynamoStore",
    "Refused",
    "_deser",
    "_ser",
    "execution_from_item",
    "execution_key",
    "execution_to_item",
    "is_refused",
    "job_from_item",
    "job_to_item",
    "open_shard_of",
    "refused_as",
]
