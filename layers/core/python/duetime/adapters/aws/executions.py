"""Executions in DynamoDB: rows by due partition and time, claimed by one conditional write, every later
write by a worker fenced by its attempt (one helper) and every refusal mapped in one place (base.refused_as)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from duetime.adapters.aws.base import Refused, is_refused, refused_as
from duetime.adapters.aws.history import DynamoHistory
from duetime.adapters.aws.items import _deser, _ser, execution_from_item, open_shard_of
from duetime.adapters.aws.quotas import QUOTA_TRANSACTION_ATTEMPTS, DynamoQuotas
from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.definitions import (
    EXECUTIONS_BY_JOB_INDEX,
    EXECUTIONS_DEAD_BY_OWNER_INDEX,
    EXECUTIONS_OPEN_BY_JOB_INDEX,
    EXECUTIONS_OPEN_INDEX,
    FIRST_LOOKBACK_SECONDS,
)
from duetime.domain.errors import StaleAttempt
from duetime.domain.history import slots_between
from duetime.domain.job_index import indexed_at_claim
from duetime.domain.keys import (
    MOST_SHARDS_KEY,
    ExecutionKey,
    bucket_of_partition,
    dead_letter_key,
    due_ms_of_sort_key,
    execution_id_bound,
    execution_id_of_sort_key,
    job_of_sort_key,
    open_index_partitions,
    open_page_after,
    preload_record_key,
    sort_key_after,
)
from duetime.domain.models import MAX_JITTER_SECONDS, Execution, ExecutionStatus, from_ms, to_ms
from duetime.domain.quotas import active_jobs_key
from duetime.domain.results import stored_json, truncate_error
from duetime.service.ports import ClaimOutcome, JobEnding, OpenPage, Page, StoredExecution, new_claim_token

# The fence of every write by the worker holding an attempt: the row still runs that attempt.
HELD_BY_ATTEMPT = "#s = :running AND attempt = :a"
# The values of DynamoExecutions.STILL_OPEN.
STILL_OPEN_VALUES = {
    ":scheduled": ExecutionStatus.SCHEDULED.value,
    ":running": ExecutionStatus.RUNNING.value,
    ":failed": ExecutionStatus.FAILED.value,
}
# ...and, when the writer names it, the claim's token (minted at claim, known only to its holder).
HELD_BY_CLAIM = "claimToken = :token"


def _fence(claim_token: str | None) -> tuple[str, dict[str, Any]]:
    """The condition and values that hold a write to `claim_token`, when one is given."""
    if claim_token is None:
        return "", {}
    return HELD_BY_CLAIM, {":token": claim_token}


class DynamoExecutions(DynamoHistory, DynamoQuotas):
    """The executions table and its byJob, open and openByJob indexes (keys only: rows are read behind them).
    The sparse `open` index holds the rows a sweep found still open once overdue (sweep_open), not every row;
    byJob holds every row but a plain run's (adapters/aws/history.py reads a job's runs from both)."""

    indexes_every_open_run = False  # openByJob: domain/job_index.py says which runs have an entry

    # -- a one-off job completed (or reopened) in the write that ends (or retries) its run -----------------

    def _job_ending_ops(self, ending: JobEnding) -> list[dict[str, Any]]:
        """The job's status change, conditioned on a status it moves from (not on its version: an edit
        meanwhile does not stop a run's end), and the owner's active-jobs counter moved with it."""
        job = ending.job
        froms = {f":from{i}": status.value for i, status in enumerate(ending.from_statuses)}
        values = {":to": ending.to_status.value, ":u": to_ms(ending.now), ":one": 1, ":note": ending.note, **froms}
        update = {
            "Update": {
                "TableName": self.jobs_table,
                "Key": _ser({"jobId": job.job_id}),
                "UpdateExpression": "SET #s = :to, updatedMs = :u, version = version + :one"
                + (", note = :note" if ending.note is not None else " REMOVE note"),
                "ConditionExpression": f"#s IN ({', '.join(froms)})",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": _ser(values),
            }
        }
        return [update, self._count_op(active_jobs_key(job.owner), ending.counter_delta)]

    def _transact_ending(self, items: list[dict[str, Any]], ending: JobEnding) -> bool:
        """Write `items` (the run's own transaction items) with `ending`'s job change in one transaction.

        False, with nothing written, if a condition of `items` refused it. If only the job's condition failed
        (the job is cancelled, or ended already), `items` are written alone and `ending.changed` stays None.
        A conflict with a concurrent transaction on the owner's counter is tried again."""
        job_ops = self._job_ending_ops(ending)
        for attempt in range(QUOTA_TRANSACTION_ATTEMPTS):
            try:
                self.client.transact_write_items(TransactItems=[*items, *job_ops])
            except ClientError as exc:
                if not is_refused(exc):
                    raise
                codes = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
                if any(code == "ConditionalCheckFailed" for code in codes[: len(items)]):
                    return False
                if not codes or "ConditionalCheckFailed" in codes[len(items) :]:
                    return self._write_alone(items)
                if attempt + 1 == QUOTA_TRANSACTION_ATTEMPTS:
                    raise
                time.sleep(0.01 * 2**attempt)
                continue
            ending.changed = ending.applied_to(ending.job)
            return True
        return False  # not reached: the last attempt returns or raises

    def _write_alone(self, items: list[dict[str, Any]]) -> bool:
        """`items` without a job change: one Update as a plain write, several as a transaction; False if refused."""
        try:
            if len(items) == 1 and "Update" in items[0]:
                self.client.update_item(**items[0]["Update"])
            else:
                self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if not is_refused(exc):
                raise
            return False
        return True

    def _read_row(self, key: ExecutionKey) -> Execution:
        """The row at `key` as just written (a transaction returns no values)."""
        response = self.client.get_item(
            TableName=self.executions_table, Key=_ser({"pk": key.pk, "sk": key.sk}), ConsistentRead=True
        )
        return execution_from_item(response["Item"])

    def put_execution(self, execution: Execution) -> bool:
        """Create an execution unless its slot exists already; True if this call created it."""
        op = self._put_execution_op(execution)["Put"]
        try:
            with refused_as():
                self.client.put_item(**op)
        except Refused:
            return False
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

    def open_executions(self, shard: int, until_ms: int) -> list[Execution]:
        """Executions of `shard` not fully handled (waiting, running, or failed with the owner not yet told)
        that were due at or before `until_ms`, oldest first (every `open` index partition of the shard)."""
        out: list[Execution] = []
        for partition in open_index_partitions(shard):
            kwargs: dict[str, Any] = {
                "TableName": self.executions_table,
                "IndexName": EXECUTIONS_OPEN_INDEX.name,
                "KeyConditionExpression": "openShard = :s AND sk <= :hi",
                "ExpressionAttributeValues": _ser({":s": partition, ":hi": f"{until_ms:013d}#~"}),
            }
            while True:
                response = self.client.query(**kwargs)
                out.extend(execution_from_item(i) for i in self._rows(response.get("Items", [])))
                last = response.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
        return sorted(out, key=lambda e: (to_ms(e.due_at), e.execution_id))

    def open_page(self, shard: int, until_ms: int, limit: int, after: str | None = None) -> OpenPage:
        """At most `limit` open executions of `shard` due at or before `until_ms`, in due order across the shard's
        `open` index partitions, starting after the position `after` (a token an earlier page returned: the
        last sort key taken; sort keys are unique, as execution ids are); bounded work whatever the index holds.

        Each partition is read up to `limit` keys from `after` on (keys only), the keys are merged in due
        order and the first `limit` rows are read."""
        start = open_page_after(after)
        # One condition on a sort key, so the bound is inclusive: the row the token names is dropped below.
        condition = "openShard = :s AND " + ("sk <= :hi" if start is None else "sk BETWEEN :lo AND :hi")
        keys: list[dict[str, Any]] = []
        more = False
        for partition in open_index_partitions(shard):
            kwargs: dict[str, Any] = {
                "TableName": self.executions_table,
                "IndexName": EXECUTIONS_OPEN_INDEX.name,
                "KeyConditionExpression": condition,
                "ExpressionAttributeValues": _ser({":s": partition, ":lo": start, ":hi": f"{until_ms:013d}#~"}),
            }
            found: list[dict[str, Any]] = []
            while len(found) <= limit:
                kwargs["Limit"] = limit + 1 - len(found)
                response = self.client.query(**kwargs)
                found.extend(item for item in response.get("Items", []) if item["sk"]["S"] != start)
                last = response.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
            more = more or len(found) > limit
            keys.extend(found[:limit])
        keys.sort(key=lambda item: str(item["sk"]["S"]))
        more = more or len(keys) > limit
        keys = keys[:limit]
        token = str(keys[-1]["sk"]["S"]) if more and keys else None
        return OpenPage(executions=[execution_from_item(i) for i in self._rows(keys)], next_token=token)

    def open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """The job's executions that have not ended (waiting, paused or running), earliest due first; with
        `due_by`, only those due by then. Those in `openByJob`, and the plain runs of its schedule written
        without an entry (domain/job_index.py): every such row still open is due after the sweep's bound
        (_swept_through_ms), so they are among the job's byJob entries from there on (keys only: one Query) and
        the rows of its slots from there to the newest a row may have (by their keys: domain/history.py), and
        only rows due after the bound are read. Cancel, pause, resume, edit and GET read this; the claim reads
        indexed_open_executions_of_job and the slots of its window by key."""
        indexed = self.indexed_open_executions_of_job(job_id, due_by, excluding)
        records: dict[str, dict[str, Any]] = {}
        job, timings = self.job_timings(job_id, self._sweep_record_keys(), records)
        swept_ms = self._swept_through_ms(records)
        # A plain run's id carries its slot, at most its spread (MAX_JITTER_SECONDS) before its due time.
        lowest = swept_ms - MAX_JITTER_SECONDS * 1000
        keys = self._query(
            TableName=self.executions_table,
            IndexName=EXECUTIONS_BY_JOB_INDEX.name,
            KeyConditionExpression="jobId = :j AND executionId >= :lo",
            FilterExpression="sk > :swept",  # only keys of rows due after the bound come back
            ExpressionAttributeValues=_ser(
                {":j": job_id, ":lo": execution_id_bound(job_id, lowest), ":swept": f"{swept_ms:013d}#~"}
            ),
        )
        known = {e.execution_id for e in indexed} | {excluding}
        until_ms = None if due_by is None else to_ms(due_by)

        def wanted(execution: Execution) -> bool:
            due_ms = to_ms(execution.due_at)
            return (
                execution.execution_id not in known
                and swept_ms < due_ms
                and (until_ms is None or due_ms <= until_ms)
                and not execution.status.is_terminal
            )

        slots = [] if job is None else slots_between(timings, from_ms(lowest), self._reach(job, timings))
        rows = self._read(list(keys), self._slot_keys(job_id, timings, slots))
        unindexed = {e.execution_id: e for e in rows if wanted(e)}
        return sorted([*indexed, *unindexed.values()], key=lambda e: (e.due_at, e.execution_id))

    def _sweep_record_keys(self) -> list[str]:
        """The control records _swept_through_ms reads: the most shards any hour was fixed with, and the
        configured shards' pre-load records."""
        return [MOST_SHARDS_KEY, *map(preload_record_key, range(self.settings.shards))]

    def _swept_through_ms(self, records: dict[str, dict[str, Any]] | None = None) -> int:
        """How far every shard's sweep has gone (the least `sweptMs` of their pre-load records): every open row
        due by then is in `openByJob` (sweep_open enters it). A shard that has not swept yet counts from where
        its first sweep will start (FIRST_LOOKBACK_SECONDS before `reconcile_after` ago). BatchGetItem only (the
        most shards any hour was fixed with comes in the first): every part that reads this may call it. The
        records of _sweep_record_keys may be given, read already."""
        if records is None:
            records = self._control_records(self._sweep_record_keys())
        most = records.get(MOST_SHARDS_KEY, {}).get("shards")
        shards = max(self.settings.shards, int(most["N"]) if most else 0)
        records = records | self._control_records([preload_record_key(s) for s in range(self.settings.shards, shards)])
        swept = [records.get(preload_record_key(s), {}).get("sweptMs") for s in range(shards)]
        first_sweep_s = self.epoch_seconds() - self.settings.reconcile_after_seconds() - FIRST_LOOKBACK_SECONDS
        return min(int(v["N"]) if v else int(first_sweep_s * 1000) for v in swept)

    def indexed_open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """The job's open executions in `openByJob`, earliest due first: bounded by what is open, never by the
        job's history; with `due_by`, only those due by then. The row of `excluding` is dropped by its index key
        (sk ends with the execution id) before any row is read, so a claim's overlap check of a job with no
        other run open reads the index alone (issue 32)."""
        condition, values = "openJob = :j", {":j": job_id}
        if due_by is not None:  # the index's sort key starts with the due time
            condition, values = "openJob = :j AND sk < :due", {":j": job_id, ":due": sort_key_after(due_by)}
        keys = list(
            self._query(
                TableName=self.executions_table,
                IndexName=EXECUTIONS_OPEN_BY_JOB_INDEX.name,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=_ser(values),
            )
        )
        if excluding is not None:
            keys = [k for k in keys if execution_id_of_sort_key(str(k["sk"]["S"])) != excluding]
        rows = [execution_from_item(i) for i in self._rows(keys)]
        return [e for e in rows if not e.status.is_terminal]

    def index_by_job(self, key: ExecutionKey) -> bool:
        """Enter the open row at `key` in openByJob (one conditional UpdateItem); False if it has ended."""
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression="SET openJob = :job",
                    ConditionExpression=f"attribute_exists(pk) AND {self.NOT_ENDED}",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues=_ser(
                        {
                            ":job": job_of_sort_key(key.sk),
                            ":scheduled": ExecutionStatus.SCHEDULED.value,
                            ":running": ExecutionStatus.RUNNING.value,
                        }
                    ),
                )
        except Refused:
            return False
        return True

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
            with refused_as():
                self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk) AND #s = :scheduled",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues=_ser(values),
                )
        except Refused:
            return False
        return True

    def query_due(self, partition: str, after_ms: int, until_ms: int) -> list[Execution]:
        """Waiting executions in `partition` with after_ms < dueMs <= until_ms, oldest first."""
        items = self._query(
            TableName=self.executions_table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            FilterExpression="#s = :scheduled",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=_ser(
                {
                    ":p": partition,
                    ":lo": f"{after_ms + 1:013d}#",
                    ":hi": f"{until_ms:013d}#~",
                    ":scheduled": ExecutionStatus.SCHEDULED.value,
                }
            ),
            ConsistentRead=True,
        )
        return [execution_from_item(i) for i in items]

    # A row the reconciler must still look at: waiting, running, or failed with its owner not told yet.
    STILL_OPEN = "#s IN (:scheduled, :running) OR (#s = :failed AND attribute_not_exists(notifiedMs))"

    def sweep_open(self, partition: str, after_ms: int, until_ms: int) -> int:
        """Enter into the `open` index every row of `partition` due in (after_ms, until_ms] that is still open
        and not in it yet, and into `openByJob` every one waiting or running without its entry there (a plain
        run, domain/job_index.py); returns how many it wrote. A run's row is written without an index entry
        unless it is due already (_indexed_at_create): most rows have ended when the sweep passes them, so a
        run that ends in time costs the index nothing. One strongly consistent Query of keys (a row written
        before its due time is seen), then a conditional UpdateItem a row still open (one that ends meanwhile
        is left)."""
        values = {":p": partition, ":lo": f"{after_ms + 1:013d}#", ":hi": f"{until_ms:013d}#~", **STILL_OPEN_VALUES}
        items = self._query(
            TableName=self.executions_table,
            KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
            FilterExpression=(
                f"(attribute_not_exists(openShard) AND ({self.STILL_OPEN})) "
                f"OR (attribute_not_exists(openJob) AND {self.NOT_ENDED})"
            ),
            ProjectionExpression="pk, sk",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=_ser(values),
            ConsistentRead=True,
        )
        keys = [ExecutionKey(pk=item["pk"]["S"], sk=item["sk"]["S"]) for item in items]
        return sum(self._enter_open(key) for key in keys)

    # A row that has not ended: waiting or running (openByJob holds these only).
    NOT_ENDED = "#s IN (:scheduled, :running)"

    def _enter_open(self, key: ExecutionKey) -> bool:
        """Put a row the sweep found into the `open` index and, unless it has ended (a failure not told yet),
        into `openByJob`; False if it ended (or its failure was told) since the sweep's query read it."""
        shard = {":shard": open_shard_of(key)}
        not_ended = {k: STILL_OPEN_VALUES[k] for k in (":scheduled", ":running")}
        for update, condition, values in (
            ("SET openShard = :shard, openJob = :job", self.NOT_ENDED, {**shard, ":job": job_of_sort_key(key.sk)}),
            ("SET openShard = :shard", self.STILL_OPEN, {**shard, **STILL_OPEN_VALUES}),
        ):
            values = {**values, **(not_ended if condition == self.NOT_ENDED else {})}
            try:
                with refused_as():
                    self.client.update_item(
                        TableName=self.executions_table,
                        Key=_ser({"pk": key.pk, "sk": key.sk}),
                        UpdateExpression=update,
                        ConditionExpression=f"attribute_exists(pk) AND ({condition})",
                        ExpressionAttributeNames={"#s": "status"},
                        ExpressionAttributeValues=_ser(values),
                    )
            except Refused:
                continue
            return True
        return False

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
            open_job = item.get("openJob", {}).get("S")
            key = ExecutionKey(pk=item["pk"]["S"], sk=item["sk"]["S"])
            yield StoredExecution(
                key=key, open_shard=open_shard, execution=execution_from_item(item), open_job=open_job
            )

    # A waiting row, or a running one whose lease ended with attempts left; at-most-once: a row never claimed.
    CLAIM = "attribute_exists(pk) AND (#s = :scheduled OR (#s = :running AND leaseUntilMs <= :now AND attempt < :max))"
    FIRST_CLAIM = "attribute_exists(pk) AND #s = :scheduled AND (attribute_not_exists(attempt) OR attempt = :zero)"

    def claim(
        self,
        key: ExecutionKey,
        worker_id: str,
        now: datetime,
        lease_until: datetime,
        max_attempts: int = 2**31,
        first_only: bool = False,
        index_by_job: bool = False,
    ) -> ClaimOutcome:
        """One conditional UpdateItem: `scheduled` (or `running` with an ended lease and attempts left) ->
        `running`, attempt + 1. `first_only` (at-most-once): a `scheduled` row never claimed before only.

        Returns the row as claimed (with its new claim token), or the row as it stands if another worker
        holds it, it has ended, or its last attempt's worker was lost with no attempt left.
        The claim token also tells this call's own write apart: if botocore resends the write because its
        answer was lost, the resend fails its condition against a row this very call claimed, which is ours.
        """
        entry = {"workerId": worker_id, "startedMs": to_ms(now)}
        token = new_claim_token()
        # A late claim, one with a long lease, or one asked to, enters the run in openByJob (domain/job_index.py).
        by_job = index_by_job or indexed_at_claim(from_ms(due_ms_of_sort_key(key.sk)), now, lease_until)
        try:
            with refused_as():
                response = self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression=(
                        "SET #s = :running, attempt = if_not_exists(attempt, :zero) + :one, workerId = :w, "
                        "leaseUntilMs = :lease, startedMs = :now, claimToken = :token, "
                        "attempts = list_append(if_not_exists(attempts, :empty), :entry)"
                        + (", openJob = :job" if by_job else "")
                    ),
                    ConditionExpression=self.FIRST_CLAIM if first_only else self.CLAIM,
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
                        }
                        | ({} if first_only else {":max": max_attempts})  # DynamoDB refuses an unused value
                        | ({":job": job_of_sort_key(key.sk)} if by_job else {})
                    ),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except Refused as refused:
            old = refused.old
            if old and old.get("claimToken", {}).get("S") == token:
                return ClaimOutcome(claimed=execution_from_item(old), current=None)
            return ClaimOutcome(claimed=None, current=execution_from_item(old) if old else None)
        return ClaimOutcome(claimed=execution_from_item(response["Attributes"]), current=None)

    def _fenced_update(
        self,
        key: ExecutionKey,
        attempt: int,
        update: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
        claim_token: str | None = None,
        ending: JobEnding | None = None,
    ) -> Execution:
        """The one write of a worker holding `attempt`: applied only while the row still runs that attempt
        (under `claim_token`, when given), with `ending`'s job change in the same transaction when given;
        returns the row as written, raises StaleAttempt otherwise."""
        also, token_values = _fence(claim_token)
        condition = f"attribute_exists(pk) AND {HELD_BY_ATTEMPT}" + (f" AND {also}" if also else "")
        values = {**values, **token_values}
        stale = StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
        op = {
            "TableName": self.executions_table,
            "Key": _ser({"pk": key.pk, "sk": key.sk}),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#s": "status", **(names or {})},
            "ExpressionAttributeValues": _ser({**values, ":running": ExecutionStatus.RUNNING.value, ":a": attempt}),
        }
        if ending is not None:
            if not self._transact_ending([{"Update": op}], ending):
                raise stale
            return self._read_row(key)
        with refused_as(stale):
            response = self.client.update_item(**op, ReturnValues="ALL_NEW")
        return execution_from_item(response["Attributes"])

    def heartbeat(
        self, key: ExecutionKey, attempt: int, lease_until: datetime, claim_token: str | None = None
    ) -> Execution:
        """Extend the lease of `attempt` (claimed with `claim_token`, when given); raises StaleAttempt if
        that attempt no longer holds the row or the token is not the claim's."""
        values = {":lease": to_ms(lease_until), ":job": job_of_sort_key(key.sk)}
        # A run that heartbeats may outlive the claim's window: it enters openByJob (domain/job_index.py).
        update = "SET leaseUntilMs = :lease, openJob = :job"
        return self._fenced_update(key, attempt, update, values, claim_token=claim_token)

    def release(self, key: ExecutionKey, attempt: int, now: datetime, claim_token: str | None = None) -> bool:
        """End the lease of `attempt` now (clean shutdown) so the next claim may take the row at once."""
        try:
            self._fenced_update(key, attempt, "SET leaseUntilMs = :now", {":now": to_ms(now)}, claim_token=claim_token)
        except StaleAttempt:
            return False
        return True

    def finish(
        self,
        key: ExecutionKey,
        attempt: int,
        status: ExecutionStatus,
        now: datetime,
        result: Any = None,
        error: str | None = None,
        claim_token: str | None = None,
        ending: JobEnding | None = None,
        outcome: str | None = None,
    ) -> Execution:
        """Record the outcome of `attempt` (the fencing token, with its claim's token when given), with
        `ending`'s job change in the same transaction; raises StaleAttempt if it no longer holds. The
        attempt's outcome is `outcome` when given, else the status."""
        index = attempt - 1
        error = None if error is None else truncate_error(error)
        values: dict[str, Any] = {
            ":status": status.value,
            ":now": to_ms(now),
            ":outcome": outcome or status.value,
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
        names = {"#e": "error"}
        if result is not None:
            sets.append("#r = :result")
            values[":result"] = stored_json(result)
            names["#r"] = "result"
        if error is not None:
            sets += ["#e = :error", f"attempts[{index}].#e = :error"]
            values[":error"] = error
        else:
            removes.append("#e")
        update = f"SET {', '.join(sets)} REMOVE {', '.join(removes)}"
        return self._fenced_update(key, attempt, update, values, names, claim_token, ending)

    def end_claimed(
        self,
        key: ExecutionKey,
        attempt: int,
        status: ExecutionStatus,
        now: datetime,
        reason: str,
        claim_token: str | None = None,
    ) -> Execution:
        """End an attempt this worker just claimed without running it (skipped or cancelled at claim)."""
        return self._fenced_update(
            key,
            attempt,
            "SET #s = :status, finishedMs = :now, skipReason = :reason, expiresAt = :expires "
            "REMOVE leaseUntilMs, openShard, openJob",
            {":status": status.value, ":now": to_ms(now), ":reason": reason, ":expires": self._expires_at(now)},
            claim_token=claim_token,
        )

    def move_for_retry(self, key: ExecutionKey, attempt: int, moved: Execution, claim_token: str | None = None) -> None:
        """Move a failed attempt's row to the partition of its new due time, in one transaction fenced by
        the attempt (and its claim's token, when given): the old row must still be held by `attempt`.
        Raises StaleAttempt otherwise."""
        also, token_values = _fence(claim_token)
        with refused_as(StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")):
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.executions_table,
                            "Key": _ser({"pk": key.pk, "sk": key.sk}),
                            "ConditionExpression": HELD_BY_ATTEMPT + (f" AND {also}" if also else ""),
                            "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": _ser(
                                {":running": ExecutionStatus.RUNNING.value, ":a": attempt, **token_values}
                            ),
                        }
                    },
                    self._put_execution_op(moved),
                ]
            )

    def end_waiting(
        self,
        key: ExecutionKey,
        status: ExecutionStatus,
        now: datetime,
        reason: str | None = None,
        skipped_count: int | None = None,
        ending: JobEnding | None = None,
    ) -> Execution | None:
        """End a still-`scheduled` execution as cancelled or skipped, with `ending`'s job change in the same
        transaction; None (nothing written) if it was no longer waiting."""
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
        op = {
            "TableName": self.executions_table,
            "Key": _ser({"pk": key.pk, "sk": key.sk}),
            # A failure stays open until its owner is told (see finish); anything else leaves the index.
            "UpdateExpression": "SET "
            + ", ".join(sets)
            + (" REMOVE openJob" if status == ExecutionStatus.FAILED else " REMOVE openShard, openJob"),
            "ConditionExpression": "attribute_exists(pk) AND #s = :scheduled",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": _ser(values),
        }
        if ending is not None:
            return self._read_row(key) if self._transact_ending([{"Update": op}], ending) else None
        try:
            with refused_as():
                response = self.client.update_item(**op, ReturnValues="ALL_NEW")
        except Refused:
            return None
        return execution_from_item(response["Attributes"])

    def mark_notified(self, key: ExecutionKey, now: datetime, owner: str | None = None) -> None:
        """The owner has been told of this failed execution: it leaves the open index and, with `owner`, enters
        that owner's dead letters (the deadByOwner index, sorted by when it was told) in the same write. No
        row (retried meanwhile, or expired): nothing to do."""
        sets, values = ["notifiedMs = :now"], dict[str, Any]({":now": to_ms(now)})
        if owner:
            sets.append("deadOwner = :owner, deadKey = :dead")
            values.update({":owner": owner, ":dead": dead_letter_key(key, now)})
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression=f"SET {', '.join(sets)} REMOVE openShard",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues=_ser(values),
                )
        except Refused:
            return

    def retry_failed(
        self, key: ExecutionKey, attempt: int, retried: Execution, ending: JobEnding | None = None
    ) -> bool:
        """Replace the failed row at `key` (still `failed` after `attempt`) by `retried`, in the partition of
        its new due time, with `ending` (its one-off job reopened), in one transaction; False (nothing
        written) if it is no longer that failed row."""
        items = [
            {
                "Delete": {
                    "TableName": self.executions_table,
                    "Key": _ser({"pk": key.pk, "sk": key.sk}),
                    "ConditionExpression": "#s = :failed AND attempt = :a",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": _ser({":failed": ExecutionStatus.FAILED.value, ":a": attempt}),
                }
            },
            self._put_execution_op(retried),
        ]
        if ending is not None:
            return self._transact_ending(items, ending)
        return self._write_alone(items)

    def list_dead_letters(self, owner: str, limit: int, cursor: str | None) -> Page[Execution]:
        """The owner's executions that failed for good (and were told), newest first, from the sparse
        deadByOwner index: one query of the owner's partition, then the rows behind it."""
        scope = f"dead:{owner}"
        start_key = decode_cursor(scope, cursor, {"deadOwner": owner, "deadKey": None, "pk": None, "sk": None})
        kwargs: dict[str, Any] = {
            "TableName": self.executions_table,
            "IndexName": EXECUTIONS_DEAD_BY_OWNER_INDEX.name,
            "KeyConditionExpression": "deadOwner = :o",
            "ExpressionAttributeValues": _ser({":o": owner}),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _ser(start_key)
        response = self.client.query(**kwargs)
        last = response.get("LastEvaluatedKey")
        rows = [execution_from_item(i) for i in self._rows(response.get("Items", []))]
        return Page(items=rows, cursor=encode_cursor(scope, _deser(last) if last else None))

    # -- rate limits and concurrency caps (issue 20) -------------------------------------------------------

    def mark_late(self, key: ExecutionKey, now: datetime) -> Execution | None:
        """One conditional UpdateItem: lateMs = now on a row that has none; the row as written, or None when
        it is gone or was marked before."""
        try:
            with refused_as():
                response = self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression="SET lateMs = :now",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(lateMs)",
                    ExpressionAttributeValues=_ser({":now": to_ms(now)}),
                    ReturnValues="ALL_NEW",
                )
        except Refused:
            return None
        return execution_from_item(response["Attributes"])

    def record_limit_wait(
        self, key: ExecutionKey, attempt: int, waited_ms: int, claim_token: str | None = None
    ) -> Execution:
        """Add `waited_ms` to the row's waitedForLimitMs, fenced by the attempt (and its claim token)."""
        update = "ADD waitedForLimitMs :w"
        return self._fenced_update(key, attempt, update, {":w": waited_ms}, claim_token=claim_token)

    def record_checkpoint(
        self,
        key: ExecutionKey,
        attempt: int,
        checkpoint: str,
        now: datetime,
        claim_token: str | None = None,
        lease_until: datetime | None = None,
    ) -> Execution:
        """Record `attempt`'s checkpoint (compact JSON text) in the heartbeat's fenced write, extending its
        lease to `lease_until` in the same write when given; raises StaleAttempt as heartbeat does."""
        sets = ["#cp = :checkpoint", "checkpointAttempt = :checkpointAttempt", "checkpointMs = :now"]
        values: dict[str, Any] = {":checkpoint": checkpoint, ":checkpointAttempt": attempt, ":now": to_ms(now)}
        if lease_until is not None:  # a heartbeat: it enters openByJob as heartbeat does
            sets.append("leaseUntilMs = :lease, openJob = :job")
            values[":lease"] = to_ms(lease_until)
            values[":job"] = job_of_sort_key(key.sk)
        names = {"#cp": "checkpoint"}
        return self._fenced_update(key, attempt, f"SET {', '.join(sets)}", values, names, claim_token)

    # -- shard counts per due-hour bucket (issue 18): what `duetime reshard --record-current` needs ------

    def stored_buckets(self) -> set[str]:
        """The due-hour buckets that hold any row: a keys-only full scan, for the one-time migration only."""
        items = self._scan(self.executions_table, ProjectionExpression="pk")
        return {bucket_of_partition(item["pk"]["S"]) for item in items}

    def reindex_open(self, key: ExecutionKey, stored: str) -> bool:
        """Move a row whose `open` index key is `stored` (an older form) to the key it has now; False if the
        row left the index or changed meanwhile."""
        try:
            with refused_as():
                self.client.update_item(
                    TableName=self.executions_table,
                    Key=_ser({"pk": key.pk, "sk": key.sk}),
                    UpdateExpression="SET openShard = :new",
                    ConditionExpression="openShard = :old",
                    ExpressionAttributeValues=_ser({":new": open_shard_of(key), ":old": stored}),
                )
        except Refused:
            return False
        return True
