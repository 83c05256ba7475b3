"""Jobs in DynamoDB: created with their first execution and idempotency record in one transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import JOBS_BY_OWNER_INDEX
from duetime.domain.errors import Conflict
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import ENDED_JOB_STATUSES, Execution, ExecutionStatus, Job, JobStatus, to_ms
from duetime.domain.quotas import RateWindow
from duetime.service.ports import JobFilter, Page
from duetime.store.dynamo.base import is_refused, refused_as
from duetime.store.dynamo.items import _deser, _ser, job_from_item, job_to_item
from duetime.store.dynamo.quotas import DynamoQuotas

# A filtered job listing reads at most this many index pages of at least FILTERED_PAGE jobs per request.
FILTERED_ROUNDS = 10
FILTERED_PAGE = 100


def _owner_index_key(item: dict[str, Any]) -> dict[str, Any]:
    """The byOwner index key of a job item, as a LastEvaluatedKey of that index would hold it."""
    return {"owner": item["owner"], "jobId": item["jobId"], "createdKey": item["createdKey"]}


# The jobs-table attributes an `ecs:` task may read to fetch its payload (job_payload, and the IAM condition
# of the task roles in infra/permissions.py).
TASK_READABLE_JOB_ATTRIBUTES = ("jobId", "owner", "definition")


class DynamoJobs(DynamoQuotas):
    """The jobs table and its byOwner index (and the owner's quota counters written with them)."""

    def create_job(
        self,
        job: Job,
        first: Execution | None,
        idempotency: dict[str, Any] | None = None,
        max_active_jobs: int | None = None,
        rate: RateWindow | None = None,
    ) -> None:
        """Write a job and its first execution together: a job never exists without it.

        With `idempotency` ({"key", "bodyHash", "expiresAt"}) the key's record is written in the same
        transaction, so concurrent duplicates create one job; raises Conflict if the key exists. The owner's
        active-jobs counter is incremented in it too (refused at `max_active_jobs`), and so is the `rate`
        window's counter when given: QuotaExceeded names the quota that refused it.
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
        self._transact_with_quotas(items, job.owner, max_active_jobs, rate, f"job {job.job_id} already exists")

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

    def list_jobs(self, owner: str, limit: int, cursor: str | None, filters: JobFilter | None = None) -> Page[Job]:
        """The owner's jobs, newest first, from the byOwner index; the cursor is the index's start key, bound
        to the owner (raises InvalidInput for one of another owner)."""
        if filters is not None and not filters.is_empty:
            return self.list_jobs_filtered(owner, limit, cursor, filters)
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

    def update_job_status(self, job: Job, status: JobStatus, now: datetime, note: str | None = None) -> Job:
        """Set a job's status and note (None removes it) if its version is still `job.version`; raises
        Conflict otherwise. Ending a job (cancelled or completed) also gives its place back to its owner's
        active-jobs counter, in the same transaction."""
        if status in ENDED_JOB_STATUSES and job.status not in ENDED_JOB_STATUSES:
            return self._end_counted(job, status, now, note)
        values = {":s": status.value, ":u": to_ms(now), ":v": job.version, ":one": 1, ":n": note}
        with refused_as(Conflict(f"job {job.job_id} changed concurrently; try again")):
            self.client.update_item(
                TableName=self.jobs_table,
                Key=_ser({"jobId": job.job_id}),
                UpdateExpression="SET #s = :s, updatedMs = :u, version = version + :one"
                + (", note = :n" if note is not None else " REMOVE note"),
                ConditionExpression="version = :v",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(values),
            )
        return job.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1, "note": note})

    # -- jobs listed with filters (GET /jobs?status=&handler=&tag=) ----------------------------------

    def list_jobs_filtered(self, owner: str, limit: int, cursor: str | None, filters: JobFilter) -> Page[Job]:
        """The owner's jobs matching `filters`: the byOwner query (one owner's partition, never a scan) with a
        FilterExpression on the job item's top-level status, handler and tags.

        DynamoDB applies Limit before the filter, so this reads up to FILTERED_ROUNDS pages of the index and
        keeps the first `limit` matches; the cursor is the index key of the last job kept (or of the last
        job read when the rounds ran out), so no job is skipped or shown twice across pages.
        """
        scope = f"owner:{owner}"
        start_key = decode_cursor(scope, cursor, {"owner": owner, "jobId": None, "createdKey": None})
        names: dict[str, str] = {"#o": "owner"}
        values: dict[str, Any] = {":o": owner}
        conditions: list[str] = []
        if filters.status is not None:
            names["#s"], values[":s"] = "status", filters.status.value
            conditions.append("#s = :s")
        if filters.handler is not None:
            names["#h"], values[":h"] = "handler", filters.handler
            conditions.append("#h = :h")
        if filters.tags:
            names["#tags"] = "tags"
        for i, (key, value) in enumerate(filters.tags):
            names[f"#t{i}"], values[f":t{i}"] = key, value
            conditions.append(f"#tags.#t{i} = :t{i}")
        kept: list[dict[str, Any]] = []
        last: dict[str, Any] | None = None
        for _ in range(FILTERED_ROUNDS):
            kwargs: dict[str, Any] = {
                "TableName": self.jobs_table,
                "IndexName": JOBS_BY_OWNER_INDEX.name,
                "KeyConditionExpression": "#o = :o",
                "FilterExpression": " AND ".join(conditions),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": _ser(values),
                "ScanIndexForward": False,
                "Limit": max(limit, FILTERED_PAGE),
            }
            if start_key:
                kwargs["ExclusiveStartKey"] = _ser(start_key)
            response = self.client.query(**kwargs)
            items = [_deser(item) for item in response.get("Items", [])]
            room = limit - len(kept)
            kept.extend(items[:room])
            evaluated = response.get("LastEvaluatedKey")
            if len(items) > room:  # more matches than fit: go on after the last one kept
                last = _owner_index_key(kept[-1])
                break
            last = _deser(evaluated) if evaluated else None
            if last is None or len(kept) == limit:
                break
            start_key = last
        jobs = [job_from_item(_ser(item)) for item in kept]
        return Page(items=jobs, cursor=encode_cursor(scope, last))

    def job_payload(self, job_id: str) -> tuple[str, dict[str, Any]] | None:
        """(owner, payload) of job `job_id`, reading only the attributes TASK_READABLE_JOB_ATTRIBUTES names
        (the `ecs:` task roles may read no other: an IAM condition on dynamodb:Attributes); None if absent."""
        names = {f"#a{i}": attr for i, attr in enumerate(TASK_READABLE_JOB_ATTRIBUTES)}
        item = self.client.get_item(
            TableName=self.jobs_table,
            Key=_ser({"jobId": job_id}),
            ProjectionExpression=", ".join(names),
            ExpressionAttributeNames=names,
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        values = _deser(item)
        payload = json.loads(values["definition"]).get("payload") or {}
        return str(values["owner"]), dict(payload)

    def scan_jobs(self) -> Iterator[Job]:
        """Every job: a full scan, for `duetime audit` only, never the hot path."""
        return (job_from_item(i) for i in self._scan(self.jobs_table))

    # -- a job edited in place (PATCH /jobs/{id} with spec fields) ---------------------------------------

    def edit_job(self, edited: Job, replaced: list[ExecutionKey], first: Execution | None) -> None:
        """One TransactWriteItems: the job put back conditioned on its stored version being
        `edited.version - 1`, each replaced waiting row deleted conditioned on still being `scheduled`, and
        `first` put where no row is (or, when it has a replaced row's key, over that row, conditioned as the
        delete would be: one transaction may touch an item once). Conflict naming `version` otherwise."""
        scheduled = {":scheduled": {"S": ExecutionStatus.SCHEDULED.value}}
        still_waiting = {
            "ConditionExpression": "#s = :scheduled",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": scheduled,
        }
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.jobs_table,
                    "Item": _ser(job_to_item(edited)),
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": _ser({":v": edited.version - 1}),
                }
            }
        ]
        first_key = None if first is None else self.key_of(first)
        for key in replaced:
            if key != first_key:
                row = _ser({"pk": key.pk, "sk": key.sk})
                items.append({"Delete": {"TableName": self.executions_table, "Key": row, **still_waiting}})
        if first is not None:
            put = self._put_execution_op(first)
            if first_key in replaced:
                put["Put"].update(still_waiting)
            items.append(put)
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if not is_refused(exc):
                raise
            codes = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
            if codes and codes[0] == "ConditionalCheckFailed":
                lost = f"job {edited.job_id} changed since version {edited.version - 1}"
                raise Conflict(lost, field="version") from exc
            raise Conflict("a waiting run of the job started meanwhile; read it again", field="version") from exc
