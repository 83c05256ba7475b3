"""The DynamoDB store: one object over the jobs, executions and control tables (a module each, as on SQLite)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from duetime.adapters.aws.control import DynamoControl
from duetime.adapters.aws.executions import DynamoExecutions
from duetime.adapters.aws.jobs import DynamoJobs


class DynamoStore(DynamoJobs, DynamoExecutions, DynamoControl):
    """Jobs, executions and control records in DynamoDB; every state change is a conditional write."""

    def batched(self) -> AbstractContextManager[None]:
        """Each DynamoDB write is its own request: a batch changes nothing (service.ports.Store)."""
        return nullcontext()
