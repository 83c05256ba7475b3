"""Per-owner quotas in DynamoDB: counter records in the control table, written in the job's own transaction."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.aws.base import DynamoTables, is_refused, refused_as
from duetime.adapters.aws.items import _deser, _plain, _ser
from duetime.domain.errors import Conflict
from duetime.domain.models import Job, JobStatus, to_ms
from duetime.domain.quotas import COUNT_ATTR, RateWindow, active_jobs_exceeded, active_jobs_key, rate_exceeded

# Concurrent creations by one owner all update its active-jobs counter, so DynamoDB may cancel one
# transaction for another's sake (TransactionConflict); it is tried again this often before a 409.
QUOTA_TRANSACTION_ATTEMPTS = 5


class DynamoQuotas(DynamoTables):
    """Each owner's active-jobs counter and its request-rate windows."""

    def _count_op(
        self, key: str, delta: int, limit: int | None = None, expires_at: int | None = None
    ) -> dict[str, Any]:
        """An Update adding `delta` to the counter record `key`, refused (condition) if it stands at `limit`."""
        update: dict[str, Any] = {
            "TableName": self.control_table,
            "Key": _ser({"key": key}),
            "UpdateExpression": "ADD #n :d" + (" SET expiresAt = :e" if expires_at is not None else ""),
            "ExpressionAttributeNames": {"#n": COUNT_ATTR},
            "ExpressionAttributeValues": _ser({":d": delta, ":e": expires_at, ":limit": limit}),
        }
        if limit is not None:
            update["ConditionExpression"] = "attribute_not_exists(#n) OR #n < :limit"
        return {"Update": update}

    def _transact_with_quotas(
        self,
        items: list[dict[str, Any]],
        owner: str,
        max_active_jobs: int | None,
        rate: RateWindow | None,
        conflict: str,
    ) -> None:
        """Write `items` with the owner's active-jobs increment (and `rate`'s) in one transaction.

        Every creation of an owner touches its counter: concurrent ones may cancel each other
        (TransactionConflict, no condition failed), which is retried; a failed condition on a counter is
        QuotaExceeded, on any other item Conflict(`conflict`)."""
        counted = [*items, self._count_op(active_jobs_key(owner), 1, max_active_jobs)]
        if rate is not None:
            counted.append(self._count_op(rate.key, 1, rate.limit, rate.ends_at_s))
        for attempt in range(QUOTA_TRANSACTION_ATTEMPTS):
            try:
                self.client.transact_write_items(TransactItems=counted)
                return
            except ClientError as exc:
                if not is_refused(exc):
                    raise
                codes = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
                failed = {i for i, code in enumerate(codes) if code == "ConditionalCheckFailed"}
                if failed & set(range(len(items))) or len(codes) != len(counted):
                    raise Conflict(conflict) from exc
                if len(items) in failed and max_active_jobs is not None:
                    raise active_jobs_exceeded(max_active_jobs) from exc
                if len(items) + 1 in failed and rate is not None:
                    raise rate_exceeded(rate) from exc
                if attempt + 1 == QUOTA_TRANSACTION_ATTEMPTS:
                    raise Conflict(conflict) from exc
                time.sleep(0.01 * 2**attempt)

    def _end_counted(self, job: Job, status: JobStatus, now: datetime, note: str | None) -> Job:
        """End a job (cancelled or completed; if its version is still `job.version`) and give its place back
        to its owner's active-jobs counter, in one transaction."""
        values = {":s": status.value, ":u": to_ms(now), ":v": job.version, ":one": 1, ":n": note}
        update = {
            "Update": {
                "TableName": self.jobs_table,
                "Key": _ser({"jobId": job.job_id}),
                "UpdateExpression": "SET #s = :s, updatedMs = :u, version = version + :one"
                + (", note = :n" if note is not None else " REMOVE note"),
                "ConditionExpression": "version = :v",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": _ser(values),
            }
        }
        with refused_as(Conflict(f"job {job.job_id} changed concurrently; try again")):
            self.client.transact_write_items(TransactItems=[update, self._count_op(active_jobs_key(job.owner), -1)])
        return job.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1, "note": note})

    def count_request(self, window: RateWindow) -> None:
        """Count a request (`window.amount`) in the owner's rate `window` (one conditional write); raises
        QuotaExceeded if the window cannot take it whole."""
        op = self._count_op(window.key, window.amount, window.counter_limit, window.ends_at_s)["Update"]
        with refused_as(rate_exceeded(window)):
            self.client.update_item(**op)

    def add_count(self, key: str, delta: int, expires_at: int) -> None:
        """Add `delta` to the counter record `key` (one UpdateItem), forgotten after `expires_at`."""
        self.client.update_item(**self._count_op(key, delta, None, expires_at)["Update"])

    def active_jobs(self, owner: str) -> int:
        """The owner's jobs neither cancelled nor completed, as its counter record stands."""
        response = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": active_jobs_key(owner)}), ConsistentRead=True
        )
        record = _plain(_deser(response["Item"])) if response.get("Item") else {}
        return int(record.get(COUNT_ATTR, 0))
