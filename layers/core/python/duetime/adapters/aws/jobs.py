"""Jobs in DynamoDB: created with their first execution and idempotency record in one transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.aws.base import is_refused, refused_as
from duetime.adapters.aws.history import DynamoHistory
from duetime.adapters.aws.items import _deser, _ser, job_from_item, job_to_item
from duetime.adapters.aws.quotas import QUOTA_TRANSACTION_ATTEMPTS, DynamoQuotas
from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import JOBS_BY_OWNER_INDEX
from duetime.domain.errors import Conflict, DuetimeError, QuotaExceeded
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import ENDED_JOB_STATUSES, Execution, ExecutionStatus, Job, JobStatus, to_ms
from duetime.domain.quotas import RateWindow, active_jobs_key
from duetime.service.ports import JobFilter, NewJob, Page

# A filtered job listing reads at most this many index pages of at least FILTERED_PAGE jobs per request.
FILTERED_ROUNDS = 10
FILTERED_PAGE = 100


# A batch creation's transaction holds at most TransactWriteItems' 100 items and, by a rough measure of its
# JSON, well under its 4 MB.
TRANSACTION_ITEMS = 100
TRANSACTION_BYTES = 3_000_000


def _creation_groups(ops: list[list[dict[str, Any]]], items_of: list[set[str]], counters: int) -> list[list[int]]:
    """The jobs' indexes in groups that fit one transaction with the owner's `counters`; two jobs writing one
    item (`items_of`: a job's item names; the same idempotency key twice, say) never share a group, since a
    transaction may not write an item twice."""
    groups: list[list[int]] = []
    current: list[int] = []
    names: set[str] = set()
    items, size = counters, 0
    for index, job_ops in enumerate(ops):
        count, weight = len(job_ops), len(json.dumps(job_ops))
        too_big = items + count > TRANSACTION_ITEMS or size + weight > TRANSACTION_BYTES
        if current and (too_big or names & items_of[index]):
            groups.append(current)
            current, names, items, size = [], set(), counters, 0
        current.append(index)
        names |= items_of[index]
        items, size = items + count, size + weight
    if current:
        groups.append(current)
    return groups


def _owner_index_key(item: dict[str, Any]) -> dict[str, Any]:
    """The byOwner index key of a job item, as a LastEvaluatedKey of that index would hold it."""
    return {"owner": item["owner"], "jobId": item["jobId"], "createdKey": item["createdKey"]}


# The jobs-table attributes an `ecs:` task may read to fetch its payload (job_payload, and the IAM condition
# of the task roles in infra/permissions.py).
TASK_READABLE_JOB_ATTRIBUTES = ("jobId", "owner", "definition")


class DynamoJobs(DynamoHistory, DynamoQuotas):
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
        items = self._creation_ops(NewJob(job, first, idempotency))
        self._transact_with_quotas(items, job.owner, max_active_jobs, rate, f"job {job.job_id} already exists")

    def _creation_ops(self, new: NewJob) -> list[dict[str, Any]]:
        """The Puts of a job's creation (job, first execution, idempotency record), each refused if it exists."""
        ops: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.jobs_table,
                    "Item": _ser(job_to_item(new.job)),
                    "ConditionExpression": "attribute_not_exists(jobId)",
                }
            }
        ]
        if new.first is not None:
            ops.append(self._put_execution_op(new.first))
        if new.idempotency is not None:
            ops.append(
                {
                    "Put": {
                        "TableName": self.control_table,
                        "Item": _ser({**new.idempotency, "jobId": new.job.job_id}),
                        "ConditionExpression": "attribute_not_exists(#k)",
                        "ExpressionAttributeNames": {"#k": "key"},
                    }
                }
            )
        return ops

    def _creation_items(self, new: NewJob) -> set[str]:
        """The names of the items a job's creation writes, by table and key."""
        names = {f"job {new.job.job_id}"}
        if new.first is not None:
            key = self.key_of(new.first)
            names.add(f"execution {key.pk} {key.sk}")
        if new.idempotency is not None:
            names.add(f"control {new.idempotency['key']}")
        return names

    def create_jobs(
        self, jobs: Sequence[NewJob], max_active_jobs: int | None = None, rate: RateWindow | None = None
    ) -> list[DuetimeError | None]:
        """Jobs of one owner, several a TransactWriteItems: each group holds its jobs' Puts and the owner's
        counters once, added to by the group's size (refused past the quota as a whole). A group is all or
        nothing, so each job stays atomic with its execution, key and counters, and the counters cost two
        writes a group instead of two a job. A job whose own Put is refused (its key or slot exists) is
        answered Conflict and the group written again without it; a group refused by a counter (the quota
        would be passed) or still cancelled by concurrent writers is written a job at a time, as create_job
        does, so exactly the jobs that fit get in.

        Why not BatchWriteItem: every creation is conditional (the key, the counters' limits), which it
        cannot express. Why not several transactions in flight: each would touch the owner's counter, and
        DynamoDB cancels concurrent transactions on one item (TransactionConflict)."""
        outcomes: list[DuetimeError | None] = [None] * len(jobs)
        ops = [self._creation_ops(new) for new in jobs]
        items_of = [self._creation_items(new) for new in jobs]
        for group in _creation_groups(ops, items_of, counters=1 if rate is None else 2):
            alone = self._create_group(jobs, ops, group, outcomes, max_active_jobs, rate)
            for index in alone:
                job = jobs[index].job
                try:
                    self._transact_with_quotas(
                        ops[index], job.owner, max_active_jobs, rate, f"job {job.job_id} already exists"
                    )
                except (Conflict, QuotaExceeded) as exc:
                    outcomes[index] = exc
        return outcomes

    def _create_group(
        self,
        jobs: Sequence[NewJob],
        ops: list[list[dict[str, Any]]],
        group: list[int],
        outcomes: list[DuetimeError | None],
        max_active_jobs: int | None,
        rate: RateWindow | None,
    ) -> list[int]:
        """Write the jobs `group` indexes in one transaction (see create_jobs), recording Conflict for those
        refused alone; returns the indexes left to write a job at a time."""
        pending = list(group)
        for attempt in range(QUOTA_TRANSACTION_ATTEMPTS):
            size = len(pending)
            too_many = (max_active_jobs is not None and size > max_active_jobs) or (
                rate is not None and size > rate.limit
            )
            if size <= 1 or too_many:  # a counter's condition can hold `size` more only below its limit
                return pending
            items = [op for index in pending for op in ops[index]]
            owner = jobs[pending[0]].job.owner
            most = None if max_active_jobs is None else max_active_jobs - size + 1
            counted = [*items, self._count_op(active_jobs_key(owner), size, most)]
            if rate is not None:
                counted.append(self._count_op(rate.key, size, rate.limit - size + 1, rate.ends_at_s))
            try:
                self.client.transact_write_items(TransactItems=counted)
                return []
            except ClientError as exc:
                if not is_refused(exc):
                    raise
                codes = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
            if len(codes) != len(counted):
                return pending
            failed = {i for i, code in enumerate(codes) if code == "ConditionalCheckFailed"}
            if failed & set(range(len(items), len(counted))):
                return pending  # a counter would pass its quota: which jobs still fit is decided one by one
            refused, start = set(), 0
            for index in pending:
                if failed & set(range(start, start + len(ops[index]))):
                    refused.add(index)
                    outcomes[index] = Conflict(f"job {jobs[index].job.job_id} already exists")
                start += len(ops[index])
            if refused:
                pending = [index for index in pending if index not in refused]
            elif attempt + 1 < QUOTA_TRANSACTION_ATTEMPTS:
                time.sleep(0.01 * 2**attempt)  # cancelled by a concurrent writer of a counter: again
        return pending

    def get_job(self, job_id: str) -> Job | None:
        response = self.client.get_item(TableName=self.jobs_table, Key=_ser({"jobId": job_id}), ConsistentRead=True)
        item = response.get("Item")
        return job_from_item(item) if item else None

    def get_jobs(self, job_ids: list[str], consistent: bool = True) -> dict[str, Job]:
        """Many jobs by id in BatchGetItem calls of up to 100 keys, strongly consistent unless not `consistent`
        (a unit a job of up to 4 KB, or half of one)."""
        found: dict[str, Job] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), 100):
            keys = [_ser({"jobId": j}) for j in unique[start : start + 100]]
            request: dict[str, Any] = {self.jobs_table: {"Keys": keys, "ConsistentRead": consistent}}
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
        `edited.version - 1`, its timings record when the edit changes its timing (DynamoHistory), each replaced
        waiting row deleted conditioned on still being `scheduled`, and `first` put where no row is (or, when it
        has a replaced row's key, over that row, conditioned as the delete would be: one transaction may touch
        an item once). Conflict naming `version` otherwise."""
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
        # `first` comes with an edit of the job's timing (service/edit.py): only then may its record change.
        timings = None if first is None else self._timings_op(edited)
        if timings is not None:
            items.append(timings)
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
