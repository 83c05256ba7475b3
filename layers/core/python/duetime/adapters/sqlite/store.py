"""The SQLite store: jobs, executions and control records with the keys, conditions and errors of DynamoDB.

Every state change is one `BEGIN IMMEDIATE` transaction that reads the row, checks the same condition the
DynamoDB adapter writes in its ConditionExpression, and writes the new row; a failed condition raises the
same domain error (Conflict, StaleAttempt) or returns the same "not done" value. TTL (`expiresAt`, epoch
seconds as on DynamoDB) is honoured on read: an expired row reads as absent and may be replaced;
`sweep_expired` deletes such rows.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.adapters.sqlite.db import Database
from duetime.definitions import MAX_ERROR_CHARS, Settings
from duetime.domain.errors import Conflict, StaleAttempt
from duetime.domain.keys import ExecutionKey
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
from duetime.service.ports import ClaimOutcome, Page, StoredExecution

# SQLite's default limit of host parameters in one statement is 999 (3.40): ask for jobs in chunks below it.
IN_CHUNK = 500
ITERATION_PAGE = 100

# --- rows: the domain objects as JSON, every time in whole milliseconds like the DynamoDB items --------


def _ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def _time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


def job_to_doc(job: Job) -> str:
    spec = JobSpec.model_validate(job.model_dump(include=set(JobSpec.model_fields)))
    return json.dumps(
        {
            "definition": json.loads(spec.model_dump_json(by_alias=True)),
            "jobId": job.job_id,
            "owner": job.owner,
            "status": job.status.value,
            "version": job.version,
            "createdMs": to_ms(job.created_at),
            "updatedMs": to_ms(job.updated_at),
        },
        separators=(",", ":"),
    )


def job_from_doc(doc: str) -> Job:
    v = json.loads(doc)
    return Job.model_validate(
        {
            **v["definition"],
            "jobId": v["jobId"],
            "owner": v["owner"],
            "status": v["status"],
            "version": int(v["version"]),
            "createdAt": from_ms(int(v["createdMs"])),
            "updatedAt": from_ms(int(v["updatedMs"])),
        }
    )


def created_key(job: Job) -> str:
    return f"{to_ms(job.created_at):013d}#{job.job_id}"


def execution_to_doc(execution: Execution, notified_ms: int | None = None) -> str:
    return json.dumps(
        {
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
            "result": execution.result,
            "error": execution.error,
            "skipReason": execution.skip_reason,
            "skippedCount": execution.skipped_count,
            "kind": execution.kind,
            "attempts": [
                {
                    "workerId": a.worker_id,
                    "startedMs": to_ms(a.started_at),
                    "finishedMs": _ms(a.finished_at),
                    "outcome": a.outcome,
                    "error": a.error,
                }
                for a in execution.attempts
            ],
            "notifiedMs": notified_ms,
        },
        separators=(",", ":"),
    )


def execution_from_doc(doc: str) -> Execution:
    return execution_from_values(json.loads(doc))


def execution_from_values(v: dict[str, Any]) -> Execution:
    return Execution(
        execution_id=v["executionId"],
        job_id=v["jobId"],
        scheduled_at=from_ms(int(v["scheduledMs"])),
        due_at=from_ms(int(v["dueMs"])),
        job_class=v["jobClass"],
        status=ExecutionStatus(v["status"]),
        attempt=int(v["attempt"]),
        worker_id=v["workerId"],
        lease_until=_time(v["leaseUntilMs"]),
        started_at=_time(v["startedMs"]),
        finished_at=_time(v["finishedMs"]),
        result=v["result"],
        error=v["error"],
        skip_reason=v["skipReason"],
        skipped_count=v["skippedCount"],
        kind=v["kind"],
        attempts=[
            AttemptRecord(
                attempt=i + 1,
                worker_id=a["workerId"],
                started_at=from_ms(int(a["startedMs"])),
                finished_at=_time(a["finishedMs"]),
                outcome=a["outcome"],
                error=a["error"],
            )
            for i, a in enumerate(v["attempts"])
        ],
    )


def _shard_of_key(key: ExecutionKey) -> str:
    return key.pk.rsplit("#", 1)[1]


def _epoch_seconds() -> int:
    return int(time.time())


# Reads see a row whose TTL has passed as gone, as DynamoDB would once its TTL sweep ran.
LIVE = "(expires_at IS NULL OR expires_at > ?)"


class SqliteStore:
    """Jobs, executions and control records in one SQLite file; implements service.ports.Store."""

    def __init__(self, db: Database, settings: Settings, epoch_seconds: Callable[[], int] = _epoch_seconds) -> None:
        self.db = db
        self.settings = settings
        # TTL runs on the real clock, as DynamoDB's does, whatever clock the service is given.
        self.epoch_seconds = epoch_seconds

    def _expires_at(self, finished_at: datetime) -> int:
        return int((finished_at + timedelta(days=self.settings.history_retention_days)).timestamp())

    def key_of(self, execution: Execution) -> ExecutionKey:
        return ExecutionKey.for_due(execution.job_id, execution.execution_id, execution.due_at, self.settings.shards)

    # -- jobs ----------------------------------------------------------------------------------------

    def create_job(self, job: Job, first: Execution | None, idempotency: dict[str, Any] | None = None) -> None:
        """The job, its first execution and its idempotency record in one transaction; raises Conflict if
        any of them exists already (nothing is written then)."""
        with self.db.write() as conn:
            try:
                conn.execute(
                    "INSERT INTO jobs (job_id, owner, created_key, doc) VALUES (?, ?, ?, ?)",
                    (job.job_id, job.owner, created_key(job), job_to_doc(job)),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"job {job.job_id} already exists") from exc
            if first is not None and not self._insert_execution(conn, first):
                raise Conflict(f"job {job.job_id} already exists")
            if idempotency is not None:
                record = {**idempotency, "jobId": job.job_id}
                if not self._insert_control(conn, str(record["key"]), record):
                    raise Conflict(f"job {job.job_id} already exists")

    def get_job(self, job_id: str) -> Job | None:
        row = self.db.connection().execute("SELECT doc FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return job_from_doc(row[0]) if row else None

    def get_jobs(self, job_ids: list[str]) -> dict[str, Job]:
        found: dict[str, Job] = {}
        unique = list(dict.fromkeys(job_ids))
        conn = self.db.connection()
        for start in range(0, len(unique), IN_CHUNK):
            chunk = unique[start : start + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for (doc,) in conn.execute(f"SELECT doc FROM jobs WHERE job_id IN ({marks})", chunk):
                job = job_from_doc(doc)
                found[job.job_id] = job
        return found

    def list_jobs(self, owner: str, limit: int, cursor: str | None) -> Page[Job]:
        """The owner's jobs, newest first; the cursor names the last job shown and is bound to the owner."""
        scope = f"owner:{owner}"
        start = decode_cursor(scope, cursor, {"owner": owner, "jobId": None, "createdKey": None})
        sql = "SELECT doc, created_key FROM jobs WHERE owner = ?"
        args: list[Any] = [owner]
        if start:
            sql += " AND created_key < ?"
            args.append(start["createdKey"])
        rows = self.db.connection().execute(sql + " ORDER BY created_key DESC LIMIT ?", [*args, limit + 1]).fetchall()
        jobs = [job_from_doc(doc) for doc, _ in rows[:limit]]
        last = None
        if len(rows) > limit and jobs:
            last = {"owner": owner, "jobId": jobs[-1].job_id, "createdKey": rows[limit - 1][1]}
        return Page(items=jobs, cursor=encode_cursor(scope, last))

    def update_job_status(self, job: Job, status: JobStatus, now: datetime) -> Job:
        """Set a job's status if its version is still `job.version`; raises Conflict otherwise."""
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
            stored = job_from_doc(row[0]) if row else None
            if stored is None or stored.version != job.version:
                raise Conflict(f"job {job.job_id} changed concurrently; try again")
            updated = stored.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1})
            conn.execute("UPDATE jobs SET doc = ? WHERE job_id = ?", (job_to_doc(updated), job.job_id))
        return job.model_copy(update={"status": status, "updated_at": now, "version": job.version + 1})

    def scan_jobs(self) -> Iterator[Job]:
        """Every job (`duetime audit` only)."""
        rows = self.db.connection().execute("SELECT doc FROM jobs ORDER BY job_id").fetchall()
        return (job_from_doc(doc) for (doc,) in rows)

    # -- executions: writes ------------------------------------------------------------------------------

    def _insert_execution(self, conn: sqlite3.Connection, execution: Execution) -> bool:
        """Insert a new row unless a live one holds its key (an expired one is replaced, as after TTL)."""
        key = self.key_of(execution)
        expires = self._expires_at(execution.finished_at) if execution.finished_at else None
        open_shard = None if execution.status.is_terminal else _shard_of_key(key)
        existing = conn.execute(
            f"SELECT 1 FROM executions WHERE pk = ? AND sk = ? AND {LIVE}", (key.pk, key.sk, self.epoch_seconds())
        ).fetchone()
        if existing:
            return False
        conn.execute(
            "INSERT OR REPLACE INTO executions (pk, sk, job_id, execution_id, status, open_shard, expires_at, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key.pk,
                key.sk,
                execution.job_id,
                execution.execution_id,
                execution.status.value,
                open_shard,
                expires,
                execution_to_doc(execution),
            ),
        )
        return True

    def put_execution(self, execution: Execution) -> bool:
        """Create an execution unless its slot exists already; True if this call created it."""
        with self.db.write() as conn:
            return self._insert_execution(conn, execution)

    def put_executions(self, executions: list[Execution]) -> list[Execution]:
        """Create each execution whose slot is new (one transaction); returns those this call created."""
        with self.db.write() as conn:
            return [e for e in executions if self._insert_execution(conn, e)]

    def _load(self, conn: sqlite3.Connection, key: ExecutionKey) -> tuple[Execution, int | None] | None:
        row = conn.execute(
            f"SELECT doc FROM executions WHERE pk = ? AND sk = ? AND {LIVE}", (key.pk, key.sk, self.epoch_seconds())
        ).fetchone()
        if row is None:
            return None
        values = json.loads(row[0])
        return execution_from_values(values), values.get("notifiedMs")

    def _store(
        self,
        conn: sqlite3.Connection,
        key: ExecutionKey,
        execution: Execution,
        open_: bool,
        expires_at: int | None,
        notified_ms: int | None = None,
    ) -> Execution:
        """Write the row at `key` as `execution`; returns it as a read would (times in whole ms)."""
        doc = execution_to_doc(execution, notified_ms)
        conn.execute(
            "UPDATE executions SET status = ?, open_shard = ?, expires_at = ?, doc = ? WHERE pk = ? AND sk = ?",
            (execution.status.value, _shard_of_key(key) if open_ else None, expires_at, doc, key.pk, key.sk),
        )
        return execution_from_doc(doc)

    def _fenced(
        self,
        key: ExecutionKey,
        attempt: int,
        change: Callable[[Execution], tuple[Execution, bool, int | None]],
    ) -> Execution:
        """Apply `change` (returning the new row, whether it stays open, its TTL or None to keep the row's)
        if `attempt` still holds the row (running under that attempt number); raises StaleAttempt otherwise."""
        with self.db.write() as conn:
            loaded = self._load(conn, key)
            if loaded is None or loaded[0].status != ExecutionStatus.RUNNING or loaded[0].attempt != attempt:
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
            current, notified = loaded
            updated, open_, expires = change(current)
            if expires is None:
                expires = self._expires_of(conn, key)
            return self._store(conn, key, updated, open_, expires, notified)

    def _expires_of(self, conn: sqlite3.Connection, key: ExecutionKey) -> int | None:
        row = conn.execute("SELECT expires_at FROM executions WHERE pk = ? AND sk = ?", (key.pk, key.sk)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def claim(
        self, key: ExecutionKey, worker_id: str, now: datetime, lease_until: datetime, max_attempts: int = 2**31
    ) -> ClaimOutcome:
        """`scheduled` (or `running` with an ended lease and attempts left) -> `running`, attempt + 1; else
        the row as it stands (None if there is none)."""
        with self.db.write() as conn:
            loaded = self._load(conn, key)
            if loaded is None:
                return ClaimOutcome(claimed=None, current=None)
            current, notified = loaded
            lease = current.lease_until
            takeover = (
                current.status == ExecutionStatus.RUNNING
                and lease is not None
                and to_ms(lease) <= to_ms(now)
                and current.attempt < max_attempts
            )
            if current.status != ExecutionStatus.SCHEDULED and not takeover:
                return ClaimOutcome(claimed=None, current=current)
            entry = AttemptRecord(attempt=len(current.attempts) + 1, worker_id=worker_id, started_at=now)
            claimed = current.model_copy(
                update={
                    "status": ExecutionStatus.RUNNING,
                    "attempt": current.attempt + 1,
                    "worker_id": worker_id,
                    "lease_until": lease_until,
                    "started_at": now,
                    "attempts": [*current.attempts, entry],
                }
            )
            stored = self._store(conn, key, claimed, True, self._expires_of(conn, key), notified)
        return ClaimOutcome(claimed=stored, current=None)

    def heartbeat(self, key: ExecutionKey, attempt: int, lease_until: datetime) -> Execution:
        """Extend the lease of `attempt`; raises StaleAttempt if that attempt no longer holds the row."""
        return self._fenced(key, attempt, lambda e: (e.model_copy(update={"lease_until": lease_until}), True, None))

    def release(self, key: ExecutionKey, attempt: int, now: datetime) -> bool:
        """End the lease of `attempt` now (clean shutdown); False if it no longer holds the row."""
        try:
            self._fenced(key, attempt, lambda e: (e.model_copy(update={"lease_until": now}), True, None))
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
    ) -> Execution:
        """Record the outcome of `attempt` (the fencing token); raises StaleAttempt if it no longer holds.
        A failed execution stays in the open set until its owner has been told (mark_notified)."""
        error = None if error is None else error[:MAX_ERROR_CHARS]
        expires = self._expires_at(now)

        def change(current: Execution) -> tuple[Execution, bool, int | None]:
            attempts = list(current.attempts)
            index = attempt - 1
            if 0 <= index < len(attempts):
                record = {"finished_at": now, "outcome": status.value}
                if error is not None:
                    record["error"] = error
                attempts[index] = attempts[index].model_copy(update=record)
            update: dict[str, Any] = {
                "status": status,
                "finished_at": now,
                "lease_until": None,
                "attempts": attempts,
                "error": error,
            }
            if result is not None:
                update["result"] = result
            return current.model_copy(update=update), status == ExecutionStatus.FAILED, expires

        return self._fenced(key, attempt, change)

    def move_for_retry(self, key: ExecutionKey, attempt: int, moved: Execution) -> None:
        """Move a failed attempt's row to the partition of its new due time in one transaction, fenced by
        the attempt; raises StaleAttempt if `attempt` no longer holds the old row or the new key is taken."""
        with self.db.write() as conn:
            loaded = self._load(conn, key)
            if loaded is None or loaded[0].status != ExecutionStatus.RUNNING or loaded[0].attempt != attempt:
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
            conn.execute("DELETE FROM executions WHERE pk = ? AND sk = ?", (key.pk, key.sk))
            if not self._insert_execution(conn, moved):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")

    def end_waiting(
        self,
        key: ExecutionKey,
        status: ExecutionStatus,
        now: datetime,
        reason: str | None = None,
        skipped_count: int | None = None,
    ) -> Execution | None:
        """End a still-`scheduled` execution as cancelled, skipped or failed; None if it was not waiting."""
        with self.db.write() as conn:
            loaded = self._load(conn, key)
            if loaded is None or loaded[0].status != ExecutionStatus.SCHEDULED:
                return None
            current, notified = loaded
            update: dict[str, Any] = {"status": status, "finished_at": now}
            if reason:
                update["skip_reason"] = reason
            if skipped_count and skipped_count > 1:
                update["skipped_count"] = skipped_count
            ended = current.model_copy(update=update)
            # A failure stays open until its owner is told (see finish); anything else leaves the open set.
            return self._store(conn, key, ended, status == ExecutionStatus.FAILED, self._expires_at(now), notified)

    def end_claimed(
        self, key: ExecutionKey, attempt: int, status: ExecutionStatus, now: datetime, reason: str
    ) -> Execution:
        """End an attempt this worker just claimed without running it (skipped or cancelled at claim)."""
        expires = self._expires_at(now)
        update = {"status": status, "finished_at": now, "skip_reason": reason, "lease_until": None}
        return self._fenced(key, attempt, lambda e: (e.model_copy(update=update), False, expires))

    def mark_notified(self, key: ExecutionKey, now: datetime) -> None:
        """The owner has been told of this failed execution: it leaves the open set (no row: nothing to do)."""
        with self.db.write() as conn:
            loaded = self._load(conn, key)
            if loaded is not None:
                self._store(conn, key, loaded[0], False, self._expires_of(conn, key), to_ms(now))

    # -- executions: reads -----------------------------------------------------------------------------

    def get_execution(self, key: ExecutionKey) -> Execution | None:
        loaded = self._load(self.db.connection(), key)
        return loaded[0] if loaded else None

    def find_execution(self, job_id: str, execution_id: str) -> Execution | None:
        row = (
            self.db.connection()
            .execute(
                f"SELECT doc FROM executions WHERE job_id = ? AND execution_id = ? AND {LIVE} LIMIT 1",
                (job_id, execution_id, self.epoch_seconds()),
            )
            .fetchone()
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
        rows = self.db.connection().execute(sql, [*args, limit + 1]).fetchall()
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
        rows = self.db.connection().execute(
            f"SELECT doc FROM executions WHERE pk = ? AND sk BETWEEN ? AND ? AND status = ? AND {LIVE} ORDER BY sk",
            (
                partition,
                f"{after_ms + 1:013d}#",
                f"{until_ms:013d}#~",
                ExecutionStatus.SCHEDULED.value,
                self.epoch_seconds(),
            ),
        )
        return [execution_from_doc(doc) for (doc,) in rows.fetchall()]

    def open_executions(self, shard: int, until_ms: int) -> list[Execution]:
        """Executions of `shard` in the open set due at or before `until_ms`, oldest first."""
        rows = self.db.connection().execute(
            f"SELECT doc FROM executions WHERE open_shard = ? AND sk <= ? AND {LIVE} ORDER BY sk",
            (f"{shard:03d}", f"{until_ms:013d}#~", self.epoch_seconds()),
        )
        return [execution_from_doc(doc) for (doc,) in rows.fetchall()]

    def scan_open_executions(self) -> Iterator[StoredExecution]:
        """Every scheduled or running execution, and every one still in the open set (`duetime audit`)."""
        rows = (
            self.db.connection()
            .execute(
                "SELECT pk, sk, open_shard, doc FROM executions "
                f"WHERE (status IN (?, ?) OR open_shard IS NOT NULL) AND {LIVE} ORDER BY pk, sk",
                (ExecutionStatus.SCHEDULED.value, ExecutionStatus.RUNNING.value, self.epoch_seconds()),
            )
            .fetchall()
        )
        for pk, sk, open_shard, doc in rows:
            key = ExecutionKey(pk=pk, sk=sk)
            yield StoredExecution(key=key, open_shard=open_shard, execution=execution_from_doc(doc))

    # -- control records -------------------------------------------------------------------------------

    def _read_control(self, conn: sqlite3.Connection, key: str) -> dict[str, Any] | None:
        row = conn.execute(f"SELECT doc FROM control WHERE key = ? AND {LIVE}", (key, self.epoch_seconds())).fetchone()
        return dict(json.loads(row[0])) if row else None

    def _write_control(self, conn: sqlite3.Connection, key: str, record: dict[str, Any]) -> None:
        expires = record.get("expiresAt")
        conn.execute(
            "INSERT OR REPLACE INTO control (key, expires_at, doc) VALUES (?, ?, ?)",
            (key, None if expires is None else int(expires), json.dumps(record, separators=(",", ":"))),
        )

    def _insert_control(self, conn: sqlite3.Connection, key: str, record: dict[str, Any]) -> bool:
        if self._read_control(conn, key) is not None:
            return False
        self._write_control(conn, key, record)
        return True

    def get_control(self, key: str) -> dict[str, Any] | None:
        return self._read_control(self.db.connection(), key)

    def acquire_lease(self, key: str, owner: str, now_ms: int, until_ms: int) -> dict[str, Any] | None:
        """Take or renew the lease on `key` for `owner` unless someone else holds it live; the record
        (with its cursor) if `owner` now holds it, else None."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            holder, held_until = record.get("leaseOwner"), record.get("leaseUntilMs")
            if holder is not None and holder != owner and not (held_until is not None and held_until <= now_ms):
                return None
            record.update(leaseOwner=owner, leaseUntilMs=until_ms)
            self._write_control(conn, key, record)
            return record

    def advance_cursor(self, key: str, owner: str, cursor_ms: int) -> bool:
        """Move the lease holder's cursor forward; False if `owner` lost the lease meanwhile."""
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.get("leaseOwner") != owner:
                return False
            record["cursorMs"] = cursor_ms
            self._write_control(conn, key, record)
            return True

    # -- TTL -----------------------------------------------------------------------------------------

    def sweep_expired(self) -> int:
        """Delete executions and control records whose TTL has passed (reads skip them already); returns
        how many rows went."""
        now = self.epoch_seconds()
        with self.db.write() as conn:
            gone = conn.execute("DELETE FROM executions WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,))
            count = gone.rowcount
            gone = conn.execute("DELETE FROM control WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,))
            return count + gone.rowcount
