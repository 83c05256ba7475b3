"""Jobs in DynamoDB: created with their first execution and idempotency record in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import JOBS_BY_OWNER_INDEX
from duetime.domain.errors import Conflict
from duetime.domain.models import Execution, Job, JobStatus, to_ms
from duetime.service.ports import Page
from duetime.store.dynamo.base import DynamoTables, refused_as
from duetime.store.dynamo.items import _deser, _ser, job_from_item, job_to_item


class DynamoJobs(DynamoTables):
    """The jobs table and its byOwner index."""

    def create_job(self, job: Job, first: Execution | None, idempotency: dict[str, Any] | None = None) -> None:
        """Write a job and its first execution together: a job never exists without it.

        With `idempotency` ({"key", "bodyHash", "expiresAt"}) the key's record is written in the same
        transaction, so concurrent duplicates create one job; raises Conflict if the key exists.
        """
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.jobs_table,
                    "Item": _ser(job_to_item(job)),
                    "ConditionExpression": "attribute_not_exists(jobId)",
                }
            }
        ]
        if first is not None:
            items.append(self._put_execution_op(first))
        if idempotency is not None:
            items.append(
                {
                    "Put": {
                        "TableName": self.control_table,
                        "Item": _ser({**idempotency, "jobId": job.job_id}),
                        "ConditionExpression": "attribute_not_exists(#k)",
                        "ExpressionAttributeNames": {"#k": "key"},
                    }
                }
            )
        with refused_as(Conflict(f"job {job.job_id} already exists")):
            self.client.transact_write_items(TransactItems=items)

    def get_job(self, job_id: str) -> Job | None:
        response = self.client.get_item(TableName=self.jobs_table, Key=_ser({"jobId": job_id}), ConsistentRead=True)
        item = response.get("Item")
        return job_from_item(item) if item else None

    def get_jobs(self, job_ids: list[str]) -> dict[str, Job]:
        """Many jobs by id in BatchGetItem calls of up to 100 keys."""
        found: dict[str, Job] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), 100):
            keys = [_ser({"jobId": j}) for j in unique[start : start + 100]]
            request: dict[str, Any] = {self.jobs_table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.jobs_table, []):
                    job = job_from_item(item)
                    found[job.job_id] = job
                request = response.get("UnprocessedKeys") or {}
        return found

    def list_jobs(self, owner: str, limit: int, cursor: str | None) -> Page[Job]:
        """The owner's jobs, newest first, from the byOwner index; the cursor is the index's start key, bound
        to the owner (raises InvalidInput for one of another owner)."""
        scope = f"owner:{owner}"
        start_key = decode_cursor(scope, cursor, {"owner": owner, "jobId": None, "createdKey": None})
        kwargs: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": JOBS_BY_OWNER_INDEX.name,
            "KeyConditionExpression": "#o = :o",
            "ExpressionAttributeNames": {"#o": "owner"},
            "ExpressionAttributeValues": _ser({":o": owner}),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _ser(start_key)
        response = self.client.query(**kwargs)
        last = response.get("LastEvaluatedKey")
        jobs = [job_from_item(i) for i in response.get("Items", [])]
        return Page(items=jobs, cursor=encode_cursor(scope, _deser(last) if last else None))

    def update_job_status(self, job: Job, status: JobStatus, now: datetime) -> Job:
        """Set a job's status if its version is still `job.version`; raises Conflict otherwise."""
        with refused_as(Conflict(f"job {job.job_id} changed concurrently; try again")):
            self.client.update_item(
                TableName=self.jobs_table,
                Key=_ser({"jobId": job.job_id}),
                UpdateExpression="SET #s = :s, updatedMs = :u, version = version + :one",
                ConditionExpression="version = :v",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser({":s": status.value, ":u": to_ms(now), ":v": job.version, ":one": 1}),
            )
        return job.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1})

    def scan_jobs(self) -> Iterator[Job]:
        """Every job: a full scan, for `duetime audit` only, never the hot path."""
        return (job_from_item(i) for i in self._scan(self.jobs_table))
