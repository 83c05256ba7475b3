"""What the DynamoDB adapters share: the client and table names, and the one mapper of refused writes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.aws.items import _ser, execution_key, execution_to_item
from duetime.adapters.shard_counts import BucketShards
from duetime.definitions import CONTROL_TABLE, EXECUTIONS_TABLE, JOBS_TABLE, Settings
from duetime.domain.keys import MOST_SHARDS_KEY, SHARDS_KEY_PREFIX, ExecutionKey, bucket_shards_key, hour_bucket
from duetime.domain.models import Execution, to_ms


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

    def __init__(self, client: Any, settings: Settings, epoch_seconds: Callable[[], float] = time.time) -> None:
        self.client = client
        self.settings = settings
        # The clock a new row's write is judged by (_indexed_at_create); the tests and the simulation inject theirs.
        self.epoch_seconds = epoch_seconds
        self.jobs_table = settings.table_name(JOBS_TABLE)
        self.executions_table = settings.table_name(EXECUTIONS_TABLE)
        self.control_table = settings.table_name(CONTROL_TABLE)
        self.bucket_shards = BucketShards(settings.shards, self._read_bucket_shards, self._fix_bucket_shards)

    def _expires_at(self, finished_at: datetime) -> int:
        retention = timedelta(days=self.settings.history_retention_days)
        return int((finished_at + retention).timestamp())

    def key_of(self, execution: Execution) -> ExecutionKey:
        """Where the row lives: the partition of its due hour, with that hour's fixed shard count."""
        return execution_key(execution, self.bucket_shards.of(hour_bucket(execution.due_at)))

    def _control_records(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The control records of `keys` that exist, as stored, by key: BatchGetItem of up to 100 keys a call,
        strongly consistent (every part's role may call BatchGetItem on the control table)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 100):
            wanted = [_ser({"key": k}) for k in unique[start : start + 100]]
            request: dict[str, Any] = {self.control_table: {"Keys": wanted, "ConsistentRead": True}}
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.control_table, []):
                    found[item["key"]["S"]] = item
                request = response.get("UnprocessedKeys") or {}
        return found

    def _read_bucket_shards(self, buckets: list[str]) -> dict[str, int]:
        records = self._control_records([bucket_shards_key(b) for b in buckets])
        return {key.removeprefix(SHARDS_KEY_PREFIX): int(item["shards"]["N"]) for key, item in records.items()}

    def _fix_bucket_shards(self, bucket: str, shards: int) -> int:
        """Fix `bucket` at `shards` unless a writer did first (then its count stands); returns the count.
        The largest count ever fixed is raised first, so whoever visits shards never misses this bucket's."""
        try:
            self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": MOST_SHARDS_KEY}),
                UpdateExpression="SET shards = :n",
                ConditionExpression="attribute_not_exists(shards) OR shards < :n",
                ExpressionAttributeValues=_ser({":n": shards}),
            )
        except ClientError as exc:
            if not is_refused(exc):
                raise
        try:
            self.client.put_item(
                TableName=self.control_table,
                Item=_ser({"key": bucket_shards_key(bucket), "shards": shards}),
                ConditionExpression="attribute_not_exists(#k)",
                ExpressionAttributeNames={"#k": "key"},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not is_refused(exc):
                raise
            old = exc.response.get("Item")
            if old is None:  # no old item handed back (an emulator): read the winner's count
                return self._read_bucket_shards([bucket])[bucket]
            return int(old["shards"]["N"])
        return shards

    def _indexed_at_create(self, execution: Execution) -> bool:
        """Whether a new open row enters the `open` index (and `openByJob`) with its write: only one due before
        the sweep may have passed it (service/dispatch.py, sweep), that is due more than half the reconcile
        delay ago (a backfilled or caught-up slot, a one-off due in the past). A row due later enters them only
        if it is still open when the sweep passes it, so a run that ends in time never writes the `open` index
        (issue 32), nor `openByJob` if it is a plain run of its schedule (domain/job_index.py)."""
        horizon_ms = (self.epoch_seconds() - self.settings.reconcile_after_seconds() / 2) * 1000
        return not execution.status.is_terminal and to_ms(execution.due_at) <= horizon_ms

    def _put_execution_op(self, execution: Execution) -> dict[str, Any]:
        """A Put of a new execution (in a job's creation, a retry's move, or alone)."""
        expires = self._expires_at(execution.finished_at) if execution.finished_at else None
        item = execution_to_item(execution, self.key_of(execution), expires, self._indexed_at_create(execution))
        return {
            "Put": {
                "TableName": self.executions_table,
                "Item": _ser(item),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    @staticmethod
    def _pages(call: Callable[..., dict[str, Any]], **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item a Query or Scan (`call`) returns, page after page."""
        while True:
            response = call(**kwargs)
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        return self._pages(self.client.query, **kwargs)

    def _scan(self, table: str, **extra: Any) -> Iterator[dict[str, Any]]:
        return self._pages(self.client.scan, TableName=table, ConsistentRead=True, **extra)
