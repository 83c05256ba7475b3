"""What the DynamoDB adapters share: the client and table names, and the one mapper of refused writes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from duetime.definitions import CONTROL_TABLE, EXECUTIONS_TABLE, JOBS_TABLE, Settings
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import Execution
from duetime.store.dynamo.items import _ser, execution_key, execution_to_item


class Refused(Exception):
    """DynamoDB refused a conditional write; `old` is the item as it stood, when the write asked for it."""

    def __init__(self, old: dict[str, Any] | None) -> None:
        super().__init__("conditional write refused")
        self.old = old


def is_refused(exc: ClientError) -> bool:
    """A write refused because its condition failed, or a transaction cancelled because a condition failed
    or a concurrent transaction on the same items won (TransactionConflict): either way another writer got
    there first, and the caller re-reads."""
    error = exc.response.get("Error", {}).get("Code")
    if error == "ConditionalCheckFailedException":
        return True
    if error != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons") or []
    codes = {r.get("Code") for r in reasons}
    return bool(codes & {"ConditionalCheckFailed", "TransactionConflict"}) or not reasons


@contextmanager
def refused_as(error: Exception | None = None) -> Iterator[None]:
    """The one error mapper: a refused write inside raises `error` (a domain error), or Refused when none is
    given (for callers whose answer to a refusal is False or None); any other ClientError propagates."""
    try:
        yield
    except ClientError as exc:
        if not is_refused(exc):
            raise
        if error is not None:
            raise error from exc
        raise Refused(exc.response.get("Item")) from exc


class DynamoTables:
    """The client and the three tables' names, with what the jobs, executions and control parts share."""

    def __init__(self, client: Any, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.jobs_table = settings.table_name(JOBS_TABLE)
        self.executions_table = settings.table_name(EXECUTIONS_TABLE)
        self.control_table = settings.table_name(CONTROL_TABLE)

    def _expires_at(self, finished_at: datetime) -> int:
        retention = timedelta(days=self.settings.history_retention_days)
        return int((finished_at + retention).timestamp())

    def key_of(self, execution: Execution) -> ExecutionKey:
        return execution_key(execution, self.settings.shards)

    def _put_execution_op(self, execution: Execution) -> dict[str, Any]:
        """A Put of a new execution (in a job's creation, a retry's move, or alone)."""
        expires = self._expires_at(execution.finished_at) if execution.finished_at else None
        return {
            "Put": {
                "TableName": self.executions_table,
                "Item": _ser(execution_to_item(execution, self.settings.shards, expires)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _scan(self, table: str, **extra: Any) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True, **extra}
        while True:
            response = self.client.scan(**kwargs)
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last
