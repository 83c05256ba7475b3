"""DynamoDB adapters for jobs, executions and control records; the only place item shapes are known."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import (
    CONTROL_TABLE,
    EXECUTIONS_BY_JOB_INDEX,
    EXECUTIONS_OPEN_BY_JOB_INDEX,
    EXECUTIONS_OPEN_INDEX,
    EXECUTIONS_TABLE,
    JOBS_BY_OWNER_INDEX,
    JOBS_TABLE,
    Settings,
)
from duetime.domain.errors import Conflict, StaleAttempt
from duetime.domain.exclusions import Calendar
from duetime.domain.keys import (
    ANNOUNCER_PREFIX,
    CALENDAR_ATTR_PREFIX,
    ExecutionKey,
    announcements_key,
    calendar_entry,
    calendars_from_record,
    calendars_key,
    ended_announcers,
    served_names,
)
from duetime.domain.models import (
    AttemptRecord,
    Execution,
    ExecutionStatus,
    Job,
    JobSpec,
    JobStatus,
    from_ms,
    to_ms,
)
from duetime.domain.quotas import COUNT_ATTR, RateWindow, active_jobs_exceeded, active_jobs_key, rate_exceeded
from duetime.domain.results import truncate_error
from duetime.service.ports import ClaimOutcome, OpenPage, Page, StoredExecution

# Concurrent creations by one owner all update its active-jobs counter, so DynamoDB may cancel one
# transaction for another's sake (TransactionConflict); it is tried again this often before a 409.
QUOTA_TRANSACTION_ATTEMPTS = 5

# The jobs-table attributes an `ecs:` task may read to fetch its payload (job_payload, and the IAM condition
# of the task roles in infra/permissions.py).
TASK_READABLE_JOB_ATTRIBUTES = ("jobId", "owner", "definition")

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _ser(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}


def _deser(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _is_condition_failure(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def _is_transaction_condition_failure(exc: ClientError) -> bool:
    """A transaction refused because a condition failed, or because a concurrent transaction on the same
    items won (TransactionConflict): either way another writer got there first, and the caller re-reads."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons") or []
    codes = {r.get("Code") for r in reasons}
    return bool(codes & {"ConditionalCheckFailed", "TransactionConflict"}) or not reasons


def _ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def _opt_time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


# --- jobs ----------------------------------------------------------------------------------------


def job_to_item(job: Job) -> dict[str, Any]:
    spec = JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
    return {
        "jobId": job.job_id,
        "owner": job.owner,
        "createdKey": f"{to_ms(job.created_at):013d}#{job.job_id}",
        "status": job.status.value,
        "version": job.version,
        "createdMs": to_ms(job.created_at),
        "updatedMs": to_ms(job.updated_at),
        "definition": spec.model_dump_json(by_alias=True),
        "ownerGroups": list(job.owner_groups) or None,
    }


def job_from_item(item: dict[str, Any]) -> Job:
    values = _deser(item)
    definition = json.loads(values["definition"])
    return Job.model_validate(
        {
            **definition,
            "jobId": values["jobId"],
            "owner": values["owner"],
            "status": values["status"],
            "version": int(values["version"]),
            "createdAt": from_ms(int(values["createdMs"])),
            "updatedAt": from_ms(int(values["updatedMs"])),
            "ownerGroups": list(values.get("ownerGroups") or []),
        }
    )


# --- executions ------------------------------------------------------------------------------------


def execution_key(execution: Execution, shards: int) -> ExecutionKey:
    return ExecutionKey.for_due(execution.job_id, execution.execution_id, execution.due_at, shards)


def _attempt_to_item(record: AttemptRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in {
            "workerId": record.worker_id,
            "startedMs": to_ms(record.started_at),
            "finishedMs": _ms(record.finished_at),
            "outcome": record.outcome,
            "error": record.error,
        }.items()
        if v is not None
    }


def execution_to_item(execution: Execution, shards: int, expires_at: int | None = None) -> dict[str, Any]:
    key = execution_key(execution, shards)
    return {
        "pk": key.pk,
        "sk": key.sk,
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "scheduledMs": to_ms(execution.scheduled_at),
        "dueMs": to_ms(execution.due_at),
        "jobClass": execution.job_class,
        "status": execution.status.value,
        "attempt": execution.attempt,
        "workerId": execution.worker_id,
        "leaseUntilMs": _ms(execution.lease_until),
        "startedMs": _ms(execution.started_at),
        "finishedMs": _ms(execution.finished_at),
        "result": None if execution.result is None else json.dumps(execution.result),
        "error": execution.error,
        "skipReason": execution.skip_reason,
        "skippedCount": execution.skipped_count,
        "kind": execution.kind,
        "attempts": [_attempt_to_item(a) for a in execution.attempts],
        "expiresAt": expires_at,
        "openShard": None if execution.status.is_terminal else open_shard_of(key),
        "openJob": None if execution.status.is_terminal else execution.job_id,
    }


def open_shard_of(key: ExecutionKey) -> str:
    """The `open` index partition of a row: the shard part of its `hour#shard` key."""
    return key.pk.rsplit("#", 1)[1]


def execution_from_item(item: dict[str, Any]) -> Execution:
    v = _deser(item)
    attempts = [
        AttemptRecord(
            attempt=i + 1,
            worker_id=str(a.get("workerId", "")),
            started_at=from_ms(int(a["startedMs"])),
            finished_at=_opt_time(a.get("finishedMs")),
            outcome=a.get("outcome"),
            error=a.get("error"),
        )
        for i, a in enumerate(v.get("attempts") or [])
    ]
    return Execution(
        execution_id=v["executionId"],
        job_id=v["jobId"],
        scheduled_at=from_ms(int(v["scheduledMs"])),
        due_at=from_ms(int(v["dueMs"])),
        job_class=v.get("jobClass", "default"),
        status=ExecutionStatus(v["status"]),
        attempt=int(v.get("attempt", 0)),
        worker_id=v.get("workerId"),
        lease_until=_opt_time(v.get("leaseUntilMs")),
        started_at=_opt_time(v.get("startedMs")),
        finished_at=_opt_time(v.get("finishedMs")),
        result=None if v.get("result") is None else json.loads(v["result"]),
        error=v.get("error"),
        skip_reason=v.get("skipReason"),
        skipped_count=None if v.get("skippedCount") is None else int(v["skippedCount"]),
        kind=v.get("kind", "scheduled"),
        attempts=attempts,
    )


class DynamoStore:
    """Jobs, executions and control records in DynamoDB; every state change is a conditional write."""

    def __init__(self, client: Any, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.jobs_table = settings.table_name(JOBS_TABLE)
        self.executions_table = settings.table_name(EXECUTIONS_TABLE)
        self.control_table = settings.table_name(CONTROL_TABLE)

    # -- helpers ------------------------------------------------------------------------------

    def _expires_at(self, finished_at: datetime) -> int:
        retention = timedelta(days=self.settings.history_retention_days)
        return int((finished_at + retention).timestamp())

    def key_of(self, execution: Execution) -> ExecutionKey:
        return execution_key(execution, self.settings.shards)

    # -- jobs ---------------------------------------------------------------------------------

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
        """Set a job's status if its version is still `job.version`; raises Conflict otherwise. Cancelling
        also gives the job's place back to its owner's active-jobs counter, in the same transaction."""
        if status == JobStatus.CANCELLED and job.status != JobStatus.CANCELLED:
            return self._cancel_counted(job, now)
        try:
            self.client.update_item(
                TableName=self.jobs_table,
                Key=_ser({"jobId": job.job_id}),
                UpdateExpression="SET #s = :s, updatedMs = :u, version = version + :one",
                ConditionExpression="version = :v",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser({":s": status.value, ":u": to_ms(now), ":v": job.version, ":one": 1}),
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise Conflict(f"job {job.job_id} changed concurrently; try again") from exc
            raise
        return job.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1})

    # -- executions ---------------------------------------------------------------------------

    def _put_execution_op(self, execution: Execution) -> dict[str, Any]:
        expires = self._expires_at(execution.finished_at) if execution.finished_at else None
        return {
            "Put": {
                "TableName": self.executions_table,
                "Item": _ser(execution_to_item(execution, self.settings.shards, expires)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def put_execution(self, execution: Execution) -> bool:
        """Create an execution unless its slot exists already; True if this call created it."""
        op = self._put_execution_op(execution)["Put"]
        try:
            self.client.put_item(**op)
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def put_executions(self, executions: list[Execution]) -> list[Execution]:
        """Create each execution whose slot is new; returns those this call created."""
        return [e for e in executions if self.put_execution(e)]

    def get_execution(self, key: ExecutionKey) -> Execution | None:
        response = self.client.get_item(
            TableName=self.executions_table, Key=_ser({"pk": key.pk, "sk": key.sk}), ConsistentRead=True
        )
        item = response.get("Item")
        return execution_from_item(item) if item else None

    def find_execution(self, job_id: str, execution_id: str) -> Execution | None:
        """An execution by id, through the byJob index, then read strongly from its row."""
        response = self.client.query(
            TableName=self.executions_table,
            IndexName=EXECUTIONS_BY_JOB_INDEX.name,
            KeyConditionExpression="jobId = :j AND executionId = :e",
            ExpressionAttributeValues=_ser({":j": job_id, ":e": execution_id}),
        )
        items = response.get("Items", [])
        if not items:
            return None
        row = _deser(items[0])  # keys only: read the row itself, strongly
        return self.get_execution(ExecutionKey(pk=row["pk"], sk=row["sk"]))

    def list_executions(
        self, job_id: str, limit: int, cursor: str | None, newest_first: bool = True
    ) -> Page[Execution]:
        """A job's executions by id from the byJob index; the cursor is bound to the job (raises InvalidInput
        for one of another job)."""
        scope = f"job:{job_id}"
        start_key = decode_cursor(scope, cursor, {"jobId": job_id, "executionId": None, "pk": None, "sk": None})
        items, last = self._query_executions(job_id, limit, start_key, newest_first)
        return Page(items=items, cursor=encode_cursor(scope, last))

    def _query_executions(
        self, job_id: str, limit: int, start_key: dict[str, Any] | None, newest_first: bool
    ) -> tuple[list[Execution], dict[str, Any] | None]:
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_BY_JOB_INDEX.name,
            "KeyConditionExpression": "jobId = :j",
            "ExpressionAttributeValues": _ser({":j": job_id}),
            "ScanIndexForward": not newest_first,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _ser(start_key)
        response = self.client.query(**kwargs)
        last = response.get("LastEvaluatedKey")
        rows = [execution_from_item(i) for i in self._rows(response.get("Items", []))]
        return rows, _deser(last) if last else None

    def _rows(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows behind index entries (the indexes project keys only), in the entries' order."""
        wanted = [{"pk": k["pk"], "sk": k["sk"]} for k in keys]
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for start in range(0, len(wanted), 100):
            request: dict[str, Any] = {
                self.executions_table: {"Keys": wanted[start : start + 100], "ConsistentRead": True}
            }
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self.executions_table, []):
                    found[(item["pk"]["S"], item["sk"]["S"])] = item
                request = response.get("UnprocessedKeys") or {}
        return [found[(k["pk"]["S"], k["sk"]["S"])] for k in wanted if (k["pk"]["S"], k["sk"]["S"]) in found]

    def open_executions(self, shard: int, until_ms: int) -> list[Execution]:
        """Executions of `shard` not fully handled (waiting, running, or failed with the owner not yet told)
        that were due at or before `until_ms`, oldest first."""
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_OPEN_INDEX.name,
            "KeyConditionExpression": "openShard = :s AND sk <= :hi",
            "ExpressionAttributeValues": _ser({":s": f"{shard:03d}", ":hi": f"{until_ms:013d}#~"}),
        }
        out: list[Execution] = []
        while True:
            response = self.client.query(**kwargs)
            out.extend(execution_from_item(i) for i in self._rows(response.get("Items", [])))
            last = response.get("LastEvaluatedKey")
            if not last:
                return out
            kwargs["ExclusiveStartKey"] = last

    def open_page(self, shard: int, until_ms: int, limit: int, after: str | None = None) -> OpenPage:
        """At most `limit` open executions of `shard` due at or before `until_ms`, in due order, starting
        after the position `after` (a token an earlier page returned); bounded work whatever the index holds."""
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_OPEN_INDEX.name,
            "KeyConditionExpression": "openShard = :s AND sk <= :hi",
            "ExpressionAttributeValues": _ser({":s": f"{shard:03d}", ":hi": f"{until_ms:013d}#~"}),
            "Limit": limit,
        }
        if after:
            pk, _, sk = after.partition(" ")
            kwargs["ExclusiveStartKey"] = _ser({"openShard": f"{shard:03d}", "pk": pk, "sk": sk})
        keys: list[dict[str, Any]] = []
        last: dict[str, Any] | None = None
        while len(keys) < limit:
            kwargs["Limit"] = limit - len(keys)
            response = self.client.query(**kwargs)
            keys.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        token = f"{last['pk']['S']} {last['sk']['S']}" if last else None
        return OpenPage(executions=[execution_from_item(i) for i in self._rows(keys)], next_token=token)

    def open_executions_of_job(self, job_id: str) -> list[Execution]:
        """The job's executions that have not ended (waiting, paused or running), earliest due first:
        bounded by what is open, never by the job's history."""
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_OPEN_BY_JOB_INDEX.name,
            "KeyConditionExpression": "openJob = :j",
            "ExpressionAttributeValues": _ser({":j": job_id}),
        }
        keys: list[dict[str, Any]] = []
        while True:
            response = self.client.query(**kwargs)
            keys.extend(response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        rows = [execution_from_item(i) for i in self._rows(keys)]
        return [e for e in rows if not e.status.is_terminal]

    def hold_waiting(self, key: ExecutionKey) -> bool:
        """Take a waiting execution of a paused job out of the `open` index (the reconciler skips it);
        False if it is no longer waiting."""
        return self._set_waiting_open(key, None)

    def unhold_waiting(self, key: ExecutionKey) -> bool:
        """Put a held execution back in the `open` index (its job resumed); False if it is no longer waiting."""
        return self._set_waiting_open(key, open_shard_of(key))

    def _set_waiting_open(self, key: ExecutionKey, shard: str | None) -> bool:
        values: dict[str, Any] = {":scheduled": ExecutionStatus.SCHEDULED.value}
        if shard is None:
            expression = "REMOVE openShard"
        else:
            expression = "SET openShard = :shard"
            values[":shard"] = shard
        try:
            self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk) AND #s = :scheduled",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(values),
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def executions_of_job(self, job_id: str, newest_first: bool = True, limit: int = 50) -> list[Execution]:
        return self._query_executions(job_id, limit, None, newest_first)[0]

    def iter_executions_of_job(self, job_id: str) -> Iterator[Execution]:
        start: dict[str, Any] | None = None
        while True:
            rows, start = self._query_executions(job_id, 100, start, newest_first=False)
            yield from rows
            if not start:
                return

    def query_due(self, partition: str, after_ms: int, until_ms: int) -> list[Execution]:
        """Waiting executions in `partition` with after_ms < dueMs <= until_ms, oldest first."""
        out: list[Execution] = []
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi",
            "FilterExpression": "#s = :scheduled",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": _ser(
                {
                    ":p": partition,
                    ":lo": f"{after_ms + 1:013d}#",
                    ":hi": f"{until_ms:013d}#~",
                    ":scheduled": ExecutionStatus.SCHEDULED.value,
                }
            ),
            "ConsistentRead": True,
        }
        while True:
            response = self.client.query(**kwargs)
            out.extend(execution_from_item(i) for i in response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                return out
            kwargs["ExclusiveStartKey"] = last

    def _scan(self, table: str, **extra: Any) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True, **extra}
        while True:
            response = self.client.scan(**kwargs)
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def scan_jobs(self) -> Iterator[Job]:
        """Every job: a full scan, for `duetime audit` only, never the hot path."""
        return (job_from_item(i) for i in self._scan(self.jobs_table))

    def scan_open_executions(self) -> Iterator[StoredExecution]:
        """Every scheduled or running execution, and every failed one whose owner was not told yet: a full
        scan, for `duetime audit` only, never the hot path."""
        items = self._scan(
            self.executions_table,
            FilterExpression="#s IN (:scheduled, :running) OR attribute_exists(openShard)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=_ser(
                {":scheduled": ExecutionStatus.SCHEDULED.value, ":running": ExecutionStatus.RUNNING.value}
            ),
        )
        for item in items:
            open_shard = item.get("openShard", {}).get("S")
            key = ExecutionKey(pk=item["pk"]["S"], sk=item["sk"]["S"])
            yield StoredExecution(key=key, open_shard=open_shard, execution=execution_from_item(item))

    def claim(
        self, key: ExecutionKey, worker_id: str, now: datetime, lease_until: datetime, max_attempts: int = 2**31
    ) -> ClaimOutcome:
        """One conditional UpdateItem: `scheduled` (or `running` with an ended lease and attempts left) ->
        `running`, attempt + 1.

        Returns the row as claimed, or the row as it stands if another worker holds it, it has ended, or
        its last attempt's worker was lost with no attempt left.
        A claim token tells this call's own write apart: if botocore resends the write because its answer
        was lost, the resend fails its condition against a row this very call claimed, which is ours.
        """
        entry = {"workerId": worker_id, "startedMs": to_ms(now)}
        token = uuid.uuid4().hex
        try:
            response = self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression=(
                    "SET #s = :running, attempt = if_not_exists(attempt, :zero) + :one, workerId = :w, "
                    "leaseUntilMs = :lease, startedMs = :now, claimToken = :token, "
                    "attempts = list_append(if_not_exists(attempts, :empty), :entry)"
                ),
                ConditionExpression=(
                    "attribute_exists(pk) AND (#s = :scheduled OR "
                    "(#s = :running AND leaseUntilMs <= :now AND attempt < :max))"
                ),
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(
                    {
                        ":running": ExecutionStatus.RUNNING.value,
                        ":scheduled": ExecutionStatus.SCHEDULED.value,
                        ":zero": 0,
                        ":one": 1,
                        ":w": worker_id,
                        ":lease": to_ms(lease_until),
                        ":now": to_ms(now),
                        ":empty": [],
                        ":entry": [entry],
                        ":token": token,
                        ":max": max_attempts,
                    }
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                old = exc.response.get("Item")
                if old and old.get("claimToken", {}).get("S") == token:
                    return ClaimOutcome(claimed=execution_from_item(old), current=None)
                return ClaimOutcome(claimed=None, current=execution_from_item(old) if old else None)
            raise
        return ClaimOutcome(claimed=execution_from_item(response["Attributes"]), current=None)

    def heartbeat(
        self, key: ExecutionKey, attempt: int, lease_until: datetime, worker_id: str | None = None
    ) -> Execution:
        """Extend the lease of `attempt` (claimed by `worker_id`, when given); raises StaleAttempt if that
        attempt no longer holds the row or another worker claimed it."""
        condition = "attribute_exists(pk) AND #s = :running AND attempt = :a"
        values: dict[str, Any] = {
            ":lease": to_ms(lease_until),
            ":running": ExecutionStatus.RUNNING.value,
            ":a": attempt,
        }
        if worker_id is not None:
            condition += " AND workerId = :w"
            values[":w"] = worker_id
        try:
            response = self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression="SET leaseUntilMs = :lease",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}") from exc
            raise
        return execution_from_item(response["Attributes"])

    def release(self, key: ExecutionKey, attempt: int, now: datetime) -> bool:
        """End the lease of `attempt` now (clean shutdown) so the next claim may take the row at once."""
        try:
            self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression="SET leaseUntilMs = :now",
                ConditionExpression="attribute_exists(pk) AND #s = :running AND attempt = :a",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(
                    {":now": to_ms(now), ":running": ExecutionStatus.RUNNING.value, ":a": attempt}
                ),
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def finish(
        self,
        key: ExecutionKey,
        attempt: int,
        status: ExecutionStatus,
        now: datetime,
        result: Any = None,
        error: str | None = None,
    ) -> Execution:
        """Record the outcome of `attempt` (the fencing token); raises StaleAttempt if it no longer holds."""
        index = attempt - 1
        error = None if error is None else truncate_error(error)
        values: dict[str, Any] = {
            ":status": status.value,
            ":now": to_ms(now),
            ":running": ExecutionStatus.RUNNING.value,
            ":a": attempt,
            ":outcome": status.value,
            ":expires": self._expires_at(now),
        }
        sets = [
            "#s = :status",
            "finishedMs = :now",
            f"attempts[{index}].finishedMs = :now",
            f"attempts[{index}].outcome = :outcome",
            "expiresAt = :expires",
        ]
        # A failed execution stays in the open index until its owner has been told (mark_notified), so the
        # reconciler can repeat a notice lost to a crash between this write and the DLQ send.
        removes = ["leaseUntilMs", "openJob"] + ([] if status == ExecutionStatus.FAILED else ["openShard"])
        if result is not None:
            sets.append("#r = :result")
            values[":result"] = json.dumps(result)
        if error is not None:
            sets += ["#e = :error", f"attempts[{index}].#e = :error"]
            values[":error"] = error
        else:
            removes.append("#e")
        names = {"#s": "status", "#e": "error"}
        if result is not None:
            names["#r"] = "result"
        try:
            response = self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
                ConditionExpression="attribute_exists(pk) AND #s = :running AND attempt = :a",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=_ser(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}") from exc
            raise
        return execution_from_item(response["Attributes"])

    def move_for_retry(self, key: ExecutionKey, attempt: int, moved: Execution) -> None:
        """Move a failed attempt's row to the partition of its new due time, in one transaction fenced by
        the attempt: the old row must still be held by `attempt`. Raises StaleAttempt otherwise."""
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.executions_table,
                            "Key": _ser({"pk": key.pk, "sk": key.sk}),
                            "ConditionExpression": "#s = :running AND attempt = :a",
                            "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": _ser(
                                {":running": ExecutionStatus.RUNNING.value, ":a": attempt}
                            ),
                        }
                    },
                    self._put_execution_op(moved),
                ]
            )
        except ClientError as exc:
            if _is_transaction_condition_failure(exc):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}") from exc
            raise

    def end_waiting(
        self,
        key: ExecutionKey,
        status: ExecutionStatus,
        now: datetime,
        reason: str | None = None,
        skipped_count: int | None = None,
    ) -> Execution | None:
        """End a still-`scheduled` execution as cancelled or skipped; None if it was no longer waiting."""
        values: dict[str, Any] = {
            ":status": status.value,
            ":now": to_ms(now),
            ":scheduled": ExecutionStatus.SCHEDULED.value,
            ":expires": self._expires_at(now),
        }
        sets = ["#s = :status", "finishedMs = :now", "expiresAt = :expires"]
        if reason:
            sets.append("skipReason = :reason")
            values[":reason"] = reason
        if skipped_count and skipped_count > 1:
            sets.append("skippedCount = :count")
            values[":count"] = skipped_count
        try:
            response = self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                # A failure stays open until its owner is told (see finish); anything else leaves the index.
                UpdateExpression="SET "
                + ", ".join(sets)
                + (" REMOVE openJob" if status == ExecutionStatus.FAILED else " REMOVE openShard, openJob"),
                ConditionExpression="attribute_exists(pk) AND #s = :scheduled",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return None
            raise
        return execution_from_item(response["Attributes"])

    def mark_notified(self, key: ExecutionKey, now: datetime) -> None:
        """The owner has been told of this failed execution: it leaves the open index."""
        self.client.update_item(
            TableName=self.executions_table,
            Key=_ser({"pk": key.pk, "sk": key.sk}),
            UpdateExpression="SET notifiedMs = :now REMOVE openShard",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=_ser({":now": to_ms(now)}),
        )

    def end_claimed(
        self, key: ExecutionKey, attempt: int, status: ExecutionStatus, now: datetime, reason: str
    ) -> Execution:
        """End an attempt this worker just claimed without running it (skipped or cancelled at claim)."""
        try:
            response = self.client.update_item(
                TableName=self.executions_table,
                Key=_ser({"pk": key.pk, "sk": key.sk}),
                UpdateExpression=(
                    "SET #s = :status, finishedMs = :now, skipReason = :reason, expiresAt = :expires "
                    "REMOVE leaseUntilMs, openShard, openJob"
                ),
                ConditionExpression="attribute_exists(pk) AND #s = :running AND attempt = :a",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=_ser(
                    {
                        ":status": status.value,
                        ":now": to_ms(now),
                        ":reason": reason,
                        ":expires": self._expires_at(now),
                        ":running": ExecutionStatus.RUNNING.value,
                        ":a": attempt,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}") from exc
            raise
        return execution_from_item(response["Attributes"])

    # -- control records ----------------------------------------------------------------------

    def get_control(self, key: str) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=self.control_table, Key=_ser({"key": key}), ConsistentRead=True)
        item = response.get("Item")
        return _plain(_deser(item)) if item else None

    def acquire_lease(self, key: str, owner: str, now_ms: int, until_ms: int) -> dict[str, Any] | None:
        """Take or renew the lease on `key` for `owner` unless someone else holds it live.

        Returns the record (with its cursor) if `owner` now holds it, else None.
        """
        try:
            response = self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": key}),
                UpdateExpression="SET leaseOwner = :o, leaseUntilMs = :u",
                ConditionExpression="attribute_not_exists(leaseOwner) OR leaseOwner = :o OR leaseUntilMs <= :now",
                ExpressionAttributeValues=_ser({":o": owner, ":u": until_ms, ":now": now_ms}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return None
            raise
        return _plain(_deser(response["Attributes"]))

    def advance_cursor(self, key: str, owner: str, cursor_ms: int, reconcile_from: str | None = None) -> bool:
        """Move the lease holder's cursor forward, record where the reconciler goes on (`reconcile_from`, None:
        from the start) and hand the lease back, all in one write, so the next cycle (whatever its owner)
        takes the shard at once. False if `owner` lost the lease meanwhile."""
        values: dict[str, Any] = {":c": cursor_ms, ":o": owner}
        expression = "SET cursorMs = :c"
        if reconcile_from:
            expression += ", reconcileFrom = :r REMOVE leaseOwner, leaseUntilMs"
            values[":r"] = reconcile_from
        else:
            expression += " REMOVE leaseOwner, leaseUntilMs, reconcileFrom"
        try:
            self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": key}),
                UpdateExpression=expression,
                ConditionExpression="leaseOwner = :o",
                ExpressionAttributeValues=_ser(values),
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def release_lease(self, key: str, owner: str) -> bool:
        """Hand back `owner`'s lease on `key` without moving its cursor (a cycle that failed part way);
        False if `owner` did not hold it."""
        try:
            self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": key}),
                UpdateExpression="REMOVE leaseOwner, leaseUntilMs",
                ConditionExpression="leaseOwner = :o",
                ExpressionAttributeValues=_ser({":o": owner}),
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    # -- handler announcements: one control record per job class, one attribute per worker ---------------

    def announce_handlers(self, job_class: str, worker_id: str, names: list[str], now_ms: int, until_ms: int) -> None:
        """Record that `worker_id` serves `names` for `job_class` until `until_ms`, and forget announcements
        that ended before `now_ms` (unless their worker renewed them meanwhile)."""
        response = self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": announcements_key(job_class)}),
            UpdateExpression="SET #w = :entry",
            ExpressionAttributeNames={"#w": ANNOUNCER_PREFIX + worker_id},
            ExpressionAttributeValues=_ser({":entry": {"names": sorted(set(names)), "untilMs": until_ms}}),
            ReturnValues="ALL_NEW",
        )
        ended = ended_announcers(_deser(response["Attributes"]), now_ms)
        if not ended:
            return
        names_by_ref = {f"#a{i}": attr for i, attr in enumerate(ended)}
        values = {f":u{i}": until for i, until in enumerate(ended.values())}
        try:
            self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": announcements_key(job_class)}),
                UpdateExpression="REMOVE " + ", ".join(names_by_ref),
                ConditionExpression=" AND ".join(f"{ref}.untilMs = :u{i}" for i, ref in enumerate(names_by_ref)),
                ExpressionAttributeNames=names_by_ref,
                ExpressionAttributeValues=_ser(values),
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):  # one of them announced again meanwhile: prune next time
                raise

    def withdraw_handlers(self, job_class: str, worker_id: str) -> None:
        """`worker_id` stops serving `job_class` (a clean shutdown): its announcement is removed."""
        self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": announcements_key(job_class)}),
            UpdateExpression="REMOVE #w",
            ExpressionAttributeNames={"#w": ANNOUNCER_PREFIX + worker_id},
        )

    def announced_handlers(self, job_class: str, now_ms: int) -> set[str]:
        """The handler names announced for `job_class` by workers whose announcement is still live."""
        record = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": announcements_key(job_class)}), ConsistentRead=True
        ).get("Item")
        return served_names(_deser(record or {}), now_ms)

    # -- named calendars: one control record per owner, one attribute per calendar -----------------------

    def get_calendars(self, owner: str) -> dict[str, Calendar]:
        record = self.client.get_item(
            TableName=self.control_table, Key=_ser({"key": calendars_key(owner)}), ConsistentRead=True
        ).get("Item")
        return calendars_from_record(_deser(record or {}))

    def put_calendar(self, owner: str, calendar: Calendar) -> bool:
        response = self.client.update_item(
            TableName=self.control_table,
            Key=_ser({"key": calendars_key(owner)}),
            UpdateExpression="SET #c = :entry",
            ExpressionAttributeNames={"#c": CALENDAR_ATTR_PREFIX + calendar.name},
            ExpressionAttributeValues=_ser({":entry": calendar_entry(calendar)}),
            ReturnValues="UPDATED_OLD",
        )
        return CALENDAR_ATTR_PREFIX + calendar.name not in response.get("Attributes", {})

    def delete_calendar(self, owner: str, name: str) -> bool:
        try:
            self.client.update_item(
                TableName=self.control_table,
                Key=_ser({"key": calendars_key(owner)}),
                UpdateExpression="REMOVE #c",
                ConditionExpression="attribute_exists(#c)",
                ExpressionAttributeNames={"#c": CALENDAR_ATTR_PREFIX + name},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    # -- per-owner quotas: counter records in the control table (issue 14) --------------------------------

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
                if not _is_transaction_condition_failure(exc):
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

    def _cancel_counted(self, job: Job, now: datetime) -> Job:
        """Cancel a job (if its version is still `job.version`) and decrement its owner's active jobs."""
        update = {
            "Update": {
                "TableName": self.jobs_table,
                "Key": _ser({"jobId": job.job_id}),
                "UpdateExpression": "SET #s = :s, updatedMs = :u, version = version + :one",
                "ConditionExpression": "version = :v",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": _ser(
                    {":s": JobStatus.CANCELLED.value, ":u": to_ms(now), ":v": job.version, ":one": 1}
                ),
            }
        }
        try:
            self.client.transact_write_items(TransactItems=[update, self._count_op(active_jobs_key(job.owner), -1)])
        except ClientError as exc:
            if _is_transaction_condition_failure(exc):
                raise Conflict(f"job {job.job_id} changed concurrently; try again") from exc
            raise
        return job.model_copy(update={"status": JobStatus.CANCELLED, "updated_at": now, "version": job.version + 1})

    def count_request(self, window: RateWindow) -> None:
        """Count one request in the owner's rate `window` (one conditional write); raises QuotaExceeded if
        the window holds `window.limit` already."""
        op = self._count_op(window.key, 1, window.limit, window.ends_at_s)["Update"]
        try:
            self.client.update_item(**op)
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise rate_exceeded(window) from exc
            raise

    def active_jobs(self, owner: str) -> int:
        """The owner's jobs not cancelled, as its counter record stands."""
        record = self.get_control(active_jobs_key(owner)) or {}
        return int(record.get(COUNT_ATTR, 0))

    # -- what an `ecs:` task reads of its job (duetime.ecs_task; issue 14) -----------------------------

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


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB numbers as ints (every number duetime stores in control records is whole)."""
    return {k: int(v) if isinstance(v, Decimal) else v for k, v in values.items()}
