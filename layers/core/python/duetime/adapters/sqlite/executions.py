"""The executions table on SQLite: claims, heartbeats and endings fenced by attempt and claim token, retries,
dead letters, and the reads by key, job, due partition and the `open` index."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.adapters.records import execution_from_values
from duetime.adapters.sqlite.base import ITERATION_PAGE, LIVE, RUNNING, SCHEDULED
from duetime.adapters.sqlite.items import execution_from_doc
from duetime.adapters.sqlite.quotas import SqliteQuotas
from duetime.domain.errors import StaleAttempt
from duetime.domain.keys import (
    ExecutionKey,
    dead_letter_key,
    open_index_key,
    open_index_partitions,
    open_page_after,
    sort_key_after,
)
from duetime.domain.models import Execution, ExecutionStatus, to_ms
from duetime.domain.results import truncate_error
from duetime.service.ports import ClaimOutcome, JobEnding, OpenPage, Page, StoredExecution, new_claim_token

# One change of a document in a fenced write: its JSON path, the SQL value set there (`?` placeholders for its
# arguments; it may read the document as it stands, as `json_extract(doc, ...)`), and those arguments.
DocChange = tuple[str, str, Sequence[Any]]


def _fence(attempt: int, claim_token: str | None) -> tuple[str, list[Any]]:
    """The condition of every write by a running attempt, in SQL with its arguments: the row still runs
    `attempt`, claimed with `claim_token` when one is given (a plain comparison, as DynamoDB's condition)."""
    if claim_token is None:
        return "status = ? AND json_extract(doc, '$.attempt') = ?", [RUNNING, attempt]
    token = "coalesce(json_extract(doc, '$.claimToken'), '') = ?"
    return f"status = ? AND json_extract(doc, '$.attempt') = ? AND {token}", [RUNNING, attempt, claim_token]


class SqliteExecutions(SqliteQuotas):
    """Executions: every state change one transaction that checks the DynamoDB adapter's condition."""

    indexes_every_open_run = True  # an entry costs SQLite nothing

    def put_execution(self, execution: Execution) -> bool:
        """Create an execution unless its slot exists already; True if this call created it."""
        row = self._new_row(execution)
        with self.db.write() as conn:
            return self._insert(conn, row)

    def put_executions(self, executions: list[Execution]) -> list[Execution]:
        """Create each execution whose slot is new (one transaction); returns those this call created."""
        rows = [self._new_row(e) for e in executions]
        with self.db.write() as conn:
            created = [self._insert(conn, row) for row in rows]
        return [e for e, new in zip(executions, created, strict=True) if new]

    def _fenced(
        self,
        key: ExecutionKey,
        attempt: int,
        claim_token: str | None,
        changes: Sequence[DocChange],
        columns: Mapping[str, Any] | None = None,
        ending: JobEnding | None = None,
    ) -> Execution:
        """One write of a running attempt: if `attempt` still holds the row (running under that attempt
        number, claimed with `claim_token` when given), set the document's `changes` and the row's `columns`
        (a `status` among them is the document's too) in one UPDATE, condition and change in SQL as
        DynamoDB's conditional update expressions (adapters/aws/executions.py), the document never read into
        Python and written back; `ending` changes the job in the same transaction. Raises StaleAttempt
        otherwise. Reading and rewriting the document in Python was the larger part of a finished run's CPU,
        all of it under the write lock."""
        columns = dict(columns or {})
        if "status" in columns:
            changes = [("$.status", "?", [columns["status"]]), *changes]
        sets = [f"{column} = ?" for column in columns]
        sets.append("doc = json_set(doc, " + ", ".join(f"'{path}', {value}" for path, value, _ in changes) + ")")
        fence, fenced_by = _fence(attempt, claim_token)
        with self.db.write() as conn:
            row = conn.execute(
                f"UPDATE executions SET {', '.join(sets)} WHERE pk = ? AND sk = ? AND {LIVE} AND {fence} RETURNING doc",
                [
                    *columns.values(),
                    *(arg for _, _, args in changes for arg in args),
                    key.pk,
                    key.sk,
                    self.epoch_seconds(),
                    *fenced_by,
                ],
            ).fetchone()
            if row is None:
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
            self._change_job(conn, ending)
        return execution_from_doc(row[0])

    def claim(
        self,
        key: ExecutionKey,
        worker_id: str,
        now: datetime,
        lease_until: datetime,
        max_attempts: int = 2**31,
        first_only: bool = False,
        index_by_job: bool = False,  # every open row is in its job's index here
    ) -> ClaimOutcome:
        """`scheduled` (or `running` with an ended lease and attempts left) -> `running`, attempt + 1; else
        the row as it stands (None if there is none). `first_only` (at-most-once): a row never claimed before
        only."""
        now_ms, lease_ms = to_ms(now), to_ms(lease_until)
        # The condition and the change in SQL, as DynamoDB's conditional update (adapters/aws/executions.py):
        # a row never claimed, or running under a lease that has ended with attempts left.
        if first_only:
            claimable = "status = ? AND coalesce(json_extract(doc, '$.attempt'), 0) = 0"
            condition: list[Any] = [SCHEDULED]
        else:
            claimable = (
                "(status = ? OR (status = ? AND json_extract(doc, '$.leaseUntilMs') <= ?"
                " AND json_extract(doc, '$.attempt') < ?))"
            )
            condition = [SCHEDULED, RUNNING, now_ms, max_attempts]
        entry = {"workerId": worker_id, "startedMs": now_ms, "finishedMs": None, "outcome": None, "error": None}
        with self.db.write() as conn:
            row = conn.execute(
                "UPDATE executions SET status = ?, doc = json_set(doc, '$.status', ?,"
                " '$.attempt', json_extract(doc, '$.attempt') + 1, '$.workerId', ?, '$.leaseUntilMs', ?,"
                " '$.startedMs', ?, '$.attempts[#]', json(?), '$.claimToken', ?)"
                f" WHERE pk = ? AND sk = ? AND {LIVE} AND {claimable} RETURNING doc",
                [
                    RUNNING,
                    RUNNING,
                    worker_id,
                    lease_ms,
                    now_ms,
                    json.dumps(entry, separators=(",", ":")),
                    new_claim_token(),
                    key.pk,
                    key.sk,
                    self.epoch_seconds(),
                    *condition,
                ],
            ).fetchone()
            loaded = None if row is not None else self._values(conn, key)
        if row is not None:
            return ClaimOutcome(claimed=execution_from_doc(row[0]), current=None)
        return ClaimOutcome(claimed=None, current=None if loaded is None else execution_from_values(loaded[0]))

    def heartbeat(
        self, key: ExecutionKey, attempt: int, lease_until: datetime, claim_token: str | None = None
    ) -> Execution:
        """Extend the lease of `attempt` (claimed with `claim_token`, when given); raises StaleAttempt if
        that attempt no longer holds the row or the token is not the claim's."""
        return self._fenced(key, attempt, claim_token, [("$.leaseUntilMs", "?", [to_ms(lease_until)])])

    def release(self, key: ExecutionKey, attempt: int, now: datetime, claim_token: str | None = None) -> bool:
        """End the lease of `attempt` now (clean shutdown); False if it no longer holds the row."""
        try:
            self.heartbeat(key, attempt, now, claim_token)
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
        `ending`'s change of its job in the same transaction; raises StaleAttempt if it no longer holds.
        The attempt's outcome is `outcome` when given, else the status. A failed execution stays in the
        open set until its owner has been told (mark_notified)."""
        error = None if error is None else truncate_error(error)
        now_ms, index = to_ms(now), attempt - 1
        # An attempt the row lacks (json_set leaves a missing path alone) only ends the row.
        changes: list[DocChange] = [
            ("$.finishedMs", "?", [now_ms]),
            ("$.leaseUntilMs", "NULL", []),
            ("$.error", "?", [error]),
            (f"$.attempts[{index}].finishedMs", "?", [now_ms]),
            (f"$.attempts[{index}].outcome", "?", [outcome or status.value]),
        ]
        if error is not None:
            changes.append((f"$.attempts[{index}].error", "?", [error]))
        if result is not None:
            changes.append(("$.result", "json(?)", [json.dumps(result, separators=(",", ":"))]))
        columns: dict[str, Any] = {"status": status.value, "expires_at": self._expires_at(now), "open_job": None}
        if status != ExecutionStatus.FAILED:
            # A failure stays in the open set until its owner has been told (mark_notified), so the reconciler
            # can repeat a notice lost to a crash between this write and the DLQ send.
            columns["open_shard"] = None
        return self._fenced(key, attempt, claim_token, changes, columns, ending)

    def move_for_retry(self, key: ExecutionKey, attempt: int, moved: Execution, claim_token: str | None = None) -> None:
        """Move a failed attempt's row to the partition of its new due time in one transaction, fenced by
        the attempt (and its claim's token, when given); raises StaleAttempt if `attempt` no longer holds
        the old row or the new key is taken."""
        row = self._new_row(moved)
        fence, fenced_by = _fence(attempt, claim_token)
        with self.db.write() as conn:
            deleted = conn.execute(
                f"DELETE FROM executions WHERE pk = ? AND sk = ? AND {LIVE} AND {fence}",
                [key.pk, key.sk, self.epoch_seconds(), *fenced_by],
            )
            if deleted.rowcount != 1 or not self._insert(conn, row):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")

    def end_waiting(
        self,
        key: ExecutionKey,
        status: ExecutionStatus,
        now: datetime,
        reason: str | None = None,
        skipped_count: int | None = None,
        ending: JobEnding | None = None,
    ) -> Execution | None:
        """End a still-`scheduled` execution as cancelled, skipped or failed, with `ending`'s change of its
        job in the same transaction; None (nothing written) if it was not waiting."""
        now_ms, expires = to_ms(now), self._expires_at(now)
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is None or loaded[0]["status"] != SCHEDULED:
                return None
            values = loaded[0]
            values.update(status=status.value, finishedMs=now_ms)
            if reason:
                values["skipReason"] = reason
            if skipped_count and skipped_count > 1:
                values["skippedCount"] = skipped_count
            # A failure stays open until its owner is told (see finish); anything else leaves the open set.
            shard = None if status == ExecutionStatus.FAILED else False
            doc = self._write_values(conn, key, values, expires, shard=shard, job=False)
            self._change_job(conn, ending)
        return execution_from_doc(doc)

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
        changes: list[DocChange] = [("$.finishedMs", "?", [to_ms(now)]), ("$.skipReason", "?", [reason])]
        changes.append(("$.leaseUntilMs", "NULL", []))
        columns = {"status": status.value, "expires_at": self._expires_at(now), "open_shard": None, "open_job": None}
        return self._fenced(key, attempt, claim_token, changes, columns)

    def mark_notified(self, key: ExecutionKey, now: datetime, owner: str | None = None) -> None:
        """The owner has been told of this failed execution: it leaves the open set and, with `owner`, enters
        that owner's dead letters (no row: nothing to do)."""
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is not None:
                values, expires = loaded
                values["notifiedMs"] = to_ms(now)
                self._write_values(conn, key, values, expires, shard=False)
                if owner:
                    conn.execute(
                        "UPDATE executions SET dead_owner = ?, dead_key = ? WHERE pk = ? AND sk = ?",
                        (owner, dead_letter_key(key, now), key.pk, key.sk),
                    )

    def hold_waiting(self, key: ExecutionKey) -> bool:
        """Take a waiting execution of a paused job out of the `open` set (the reconciler skips it); False
        if it is no longer waiting."""
        return self._set_waiting_open(key, False)

    def unhold_waiting(self, key: ExecutionKey) -> bool:
        """Put a held execution back in the `open` set (its job resumed); False if it is no longer waiting."""
        return self._set_waiting_open(key, True)

    def _set_waiting_open(self, key: ExecutionKey, shard: bool) -> bool:
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is None or loaded[0]["status"] != SCHEDULED:
                return False
            self._write_values(conn, key, loaded[0], loaded[1], shard=shard)
            return True

    # -- executions: reads -----------------------------------------------------------------------------

    def get_execution(self, key: ExecutionKey) -> Execution | None:
        with self.db.read() as conn:
            loaded = self._values(conn, key)
        return execution_from_values(loaded[0]) if loaded else None

    def find_execution(self, job_id: str, execution_id: str) -> Execution | None:
        row = self.db.query_one(
            f"SELECT doc FROM executions WHERE job_id = ? AND execution_id = ? AND {LIVE} LIMIT 1",
            (job_id, execution_id, self.epoch_seconds()),
        )
        return execution_from_doc(row[0]) if row else None

    def _query_executions(
        self, job_id: str, limit: int, after: tuple[str, str, str] | None, newest_first: bool
    ) -> tuple[list[Execution], tuple[str, str, str] | None]:
        """A page of the job's executions ordered by (executionId, pk, sk), and the last one's position if
        more follow."""
        order = "DESC" if newest_first else "ASC"
        sql = f"SELECT doc, execution_id, pk, sk FROM executions WHERE job_id = ? AND {LIVE}"
        args: list[Any] = [job_id, self.epoch_seconds()]
        if after is not None:
            sql += f" AND (execution_id, pk, sk) {'<' if newest_first else '>'} (?, ?, ?)"
            args.extend(after)
        sql += f" ORDER BY execution_id {order}, pk {order}, sk {order} LIMIT ?"
        rows = self.db.query(sql, [*args, limit + 1])
        page = rows[:limit]
        position = (page[-1][1], page[-1][2], page[-1][3]) if len(rows) > limit and page else None
        return [execution_from_doc(r[0]) for r in page], position

    def list_executions(
        self, job_id: str, limit: int, cursor: str | None, newest_first: bool = True
    ) -> Page[Execution]:
        """A job's executions by id; the cursor names the last one shown and is bound to the job."""
        scope = f"job:{job_id}"
        start = decode_cursor(scope, cursor, {"jobId": job_id, "executionId": None, "pk": None, "sk": None})
        after = (start["executionId"], start["pk"], start["sk"]) if start else None
        items, position = self._query_executions(job_id, limit, after, newest_first)
        last = None
        if position is not None:
            last = {"jobId": job_id, "executionId": position[0], "pk": position[1], "sk": position[2]}
        return Page(items=items, cursor=encode_cursor(scope, last))

    def executions_of_job(self, job_id: str, newest_first: bool = True, limit: int = 50) -> list[Execution]:
        return self._query_executions(job_id, limit, None, newest_first)[0]

    def iter_executions_of_job(self, job_id: str) -> Iterator[Execution]:
        after: tuple[str, str, str] | None = None
        while True:
            rows, after = self._query_executions(job_id, ITERATION_PAGE, after, newest_first=False)
            yield from rows
            if after is None:
                return

    def query_due(self, partition: str, after_ms: int, until_ms: int) -> list[Execution]:
        """Waiting executions in `partition` with after_ms < dueMs <= until_ms, oldest first."""
        rows = self.db.query(
            f"SELECT doc FROM executions WHERE pk = ? AND sk BETWEEN ? AND ? AND status = ? AND {LIVE} ORDER BY sk",
            (
                partition,
                f"{after_ms + 1:013d}#",
                f"{until_ms:013d}#~",
                ExecutionStatus.SCHEDULED.value,
                self.epoch_seconds(),
            ),
        )
        return [execution_from_doc(doc) for (doc,) in rows]

    def sweep_open(self, partition: str, after_ms: int, until_ms: int) -> int:
        """Nothing to do: every open row is in the open set from its write (its index entry is part of the
        same local transaction, no extra cost), so a sweep finds none missing (service.ports.Store)."""
        return 0

    def open_executions(self, shard: int, until_ms: int) -> list[Execution]:
        """Executions of `shard` in the open set due at or before `until_ms`, oldest first."""
        partitions = open_index_partitions(shard)
        rows = self.db.query(
            f"SELECT doc FROM executions WHERE open_shard IN ({', '.join('?' * len(partitions))}) AND sk <= ? "
            f"AND {LIVE} ORDER BY sk",
            (*partitions, f"{until_ms:013d}#~", self.epoch_seconds()),
        )
        return [execution_from_doc(doc) for (doc,) in rows]

    def open_page(self, shard: int, until_ms: int, limit: int, after: str | None = None) -> OpenPage:
        """At most `limit` open executions of `shard` due at or before `until_ms`, in due order across the shard's
        `open` index partitions, starting after the position `after` (a token an earlier page returned: the last
        sort key taken), as the DynamoDB adapter pages them."""
        partitions = open_index_partitions(shard)
        sql = (
            f"SELECT doc, sk FROM executions WHERE open_shard IN ({', '.join('?' * len(partitions))}) "
            f"AND sk <= ? AND {LIVE}"
        )
        args: list[Any] = [*partitions, f"{until_ms:013d}#~", self.epoch_seconds()]
        start = open_page_after(after)
        if start is not None:
            sql += " AND sk > ?"
            args.append(start)
        rows = self.db.query(sql + " ORDER BY sk LIMIT ?", [*args, limit + 1])
        page = rows[:limit]
        token = page[-1][1] if len(rows) > limit and page else None
        return OpenPage(executions=[execution_from_doc(r[0]) for r in page], next_token=token)

    def open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """The job's executions that have not ended (waiting, paused or running), earliest due first; with
        `due_by`, only those due by then; without the execution `excluding` names."""
        bound = sort_key_after(due_by) if due_by is not None else "~"  # "~" sorts after every digit
        rows = self.db.query(
            f"SELECT doc FROM executions WHERE open_job = ? AND sk < ? AND {LIVE} ORDER BY sk",
            (job_id, bound, self.epoch_seconds()),
        )
        found = (execution_from_doc(doc) for (doc,) in rows)
        return [e for e in found if not e.status.is_terminal and e.execution_id != excluding]

    def indexed_open_executions_of_job(
        self, job_id: str, due_by: datetime | None = None, excluding: str | None = None
    ) -> list[Execution]:
        """Every open execution of the job is in its index here (an entry costs SQLite nothing)."""
        return self.open_executions_of_job(job_id, due_by, excluding)

    def index_by_job(self, key: ExecutionKey) -> bool:
        """Every open execution is in its job's index from its write here: nothing to do."""
        return True

    def scan_open_executions(self) -> Iterator[StoredExecution]:
        """Every scheduled or running execution, and every one still in the open set (`duetime audit`)."""
        rows = self.db.query(
            "SELECT pk, sk, open_shard, open_job, doc FROM executions "
            f"WHERE (status IN (?, ?) OR open_shard IS NOT NULL) AND {LIVE} ORDER BY pk, sk",
            (ExecutionStatus.SCHEDULED.value, ExecutionStatus.RUNNING.value, self.epoch_seconds()),
        )
        for pk, sk, open_shard, open_job, doc in rows:
            key = ExecutionKey(pk=pk, sk=sk)
            execution = execution_from_doc(doc)
            yield StoredExecution(key=key, open_shard=open_shard, execution=execution, open_job=open_job)

    # -- dead letters ----------------------------------------------------------------------------------

    def retry_failed(
        self, key: ExecutionKey, attempt: int, retried: Execution, ending: JobEnding | None = None
    ) -> bool:
        """Replace the failed row at `key` (still `failed` after `attempt`) by `retried`, in the partition of
        its new due time, with `ending` (its one-off job reopened), in one transaction; False (nothing
        written) if it is no longer that failed row."""
        row = self._new_row(retried)
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is None or loaded[0]["status"] != ExecutionStatus.FAILED.value or loaded[0]["attempt"] != attempt:
                return False
            if (row[0], row[1]) != (key.pk, key.sk) and self._values(conn, ExecutionKey(pk=row[0], sk=row[1])):
                return False  # the new key is taken: as DynamoDB's conditional put refuses the transaction
            conn.execute("DELETE FROM executions WHERE pk = ? AND sk = ?", (key.pk, key.sk))
            if not self._insert(conn, row):
                return False
            self._change_job(conn, ending)
            return True

    def list_dead_letters(self, owner: str, limit: int, cursor: str | None) -> Page[Execution]:
        """The owner's executions that failed for good (and were told), newest first, from the
        executions_dead_by_owner index; the cursor names the last one shown and is bound to the owner."""
        scope = f"dead:{owner}"
        start = decode_cursor(scope, cursor, {"deadOwner": owner, "deadKey": None, "pk": None, "sk": None})
        sql = f"SELECT doc, dead_key, pk, sk FROM executions WHERE dead_owner = ? AND {LIVE}"
        args: list[Any] = [owner, self.epoch_seconds()]
        if start is not None:
            sql += " AND (dead_key, pk, sk) < (?, ?, ?)"
            args.extend([start["deadKey"], start["pk"], start["sk"]])
        sql += " ORDER BY dead_key DESC, pk DESC, sk DESC LIMIT ?"
        rows = self.db.query(sql, [*args, limit + 1])
        page = rows[:limit]
        last = None
        if len(rows) > limit and page:
            last = {"deadOwner": owner, "deadKey": page[-1][1], "pk": page[-1][2], "sk": page[-1][3]}
        return Page(items=[execution_from_doc(r[0]) for r in page], cursor=encode_cursor(scope, last))

    def execution_ids_between(self, job_id: str, from_ms: int, to_ms: int) -> set[str]:
        """The ids of the job's stored executions whose slot is in [from_ms, to_ms), wherever their rows are
        (ids sort by slot: one range of the by-job index)."""
        rows = self.db.query(
            f"SELECT execution_id FROM executions WHERE job_id = ? AND execution_id BETWEEN ? AND ? AND {LIVE}",
            (job_id, f"{job_id}.{from_ms:013d}", f"{job_id}.{to_ms - 1:013d}.~", self.epoch_seconds()),
        )
        return {execution_id for (execution_id,) in rows}

    # -- the time a run waited for its limits (issue 20) -------------------------------------------------

    def record_limit_wait(
        self, key: ExecutionKey, attempt: int, waited_ms: int, claim_token: str | None = None
    ) -> Execution:
        """Add `waited_ms` to the row's waitedForLimitMs, fenced by the attempt (and its claim token)."""
        waited = ("$.waitedForLimitMs", "coalesce(json_extract(doc, '$.waitedForLimitMs'), 0) + ?", [waited_ms])
        return self._fenced(key, attempt, claim_token, [waited])

    # -- lateness budgets (issue 34) ---------------------------------------------------------------------

    def mark_late(self, key: ExecutionKey, now: datetime) -> Execution | None:
        """Record that the row was found late (lateMs = now) unless it was already; the row as written, or
        None when it is gone or was marked before."""
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is None or loaded[0].get("lateMs") is not None:
                return None
            values, expires = loaded
            values["lateMs"] = to_ms(now)
            self._write_values(conn, key, values, expires)
        return execution_from_values(values)

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
        changes: list[DocChange] = [
            ("$.checkpoint", "?", [checkpoint]),
            ("$.checkpointAttempt", "?", [attempt]),
            ("$.checkpointMs", "?", [to_ms(now)]),
        ]
        if lease_until is not None:
            changes.append(("$.leaseUntilMs", "?", [to_ms(lease_until)]))
        return self._fenced(key, attempt, claim_token, changes)

    def stored_buckets(self) -> set[str]:
        """The due-hour buckets that hold any row (the one-time migration, `duetime reshard`)."""
        rows = self.db.query("SELECT DISTINCT substr(pk, 1, instr(pk, '#') - 1) FROM executions")
        return {bucket for (bucket,) in rows}

    def reindex_open(self, key: ExecutionKey, stored: str) -> bool:
        """Move a row whose `open` index key is `stored` (an older form) to the key it has now; False if the
        row left the index or changed meanwhile."""
        with self.db.write() as conn:
            changed = conn.execute(
                "UPDATE executions SET open_shard = ? WHERE pk = ? AND sk = ? AND open_shard = ?",
                (open_index_key(key), key.pk, key.sk, stored),
            ).rowcount
        return bool(changed)
