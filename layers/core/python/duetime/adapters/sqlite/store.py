"""The SQLite store: jobs, executions and control records with the keys, conditions and errors of DynamoDB.

Every state change is one `BEGIN IMMEDIATE` transaction that reads the row, checks the same condition the
DynamoDB adapter writes in its ConditionExpression, and writes the new row; a failed condition raises the
same domain error (Conflict, StaleAttempt) or returns the same "not done" value. TTL (`expiresAt`, epoch
seconds as on DynamoDB) is honoured on read: an expired row reads as absent and may be replaced;
`sweep_expired` deletes such rows.
"""

from __future__ import annotations

import hmac
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.adapters.shard_counts import BucketShards
from duetime.adapters.sqlite.db import Database
from duetime.definitions import Settings
from duetime.domain.checkpoints import checkpoint_attributes, decode_checkpoint
from duetime.domain.errors import Conflict, DuetimeError, QuotaExceeded, StaleAttempt
from duetime.domain.exclusions import Calendar
from duetime.domain.keys import (
    ANNOUNCER_PREFIX,
    CALENDAR_ATTR_PREFIX,
    MOST_SHARDS_KEY,
    ExecutionKey,
    announcements_key,
    bucket_shards_key,
    calendar_entry,
    calendars_from_record,
    calendars_key,
    dead_letter_key,
    ended_announcers,
    hour_bucket,
    open_index_key,
    open_index_partitions,
    open_page_after,
    served_names,
    sort_key_after,
)
from duetime.domain.limits import (
    CONTROL_IDLE_SECONDS,
    LIMIT_ATTR_PREFIX,
    NEXT_START_ATTR,
    RateLimit,
    holder_attr,
    limit_entry,
    limits_from_record,
    limits_key,
    live_holders,
    reserve_start,
)
from duetime.domain.models import (
    ENDED_JOB_STATUSES,
    AttemptRecord,
    Execution,
    ExecutionStatus,
    Job,
    JobSpec,
    JobStatus,
    Overlap,
    from_ms,
    to_ms,
)
from duetime.domain.quotas import COUNT_ATTR, RateWindow, active_jobs_exceeded, active_jobs_key, rate_exceeded
from duetime.domain.results import truncate_error
from duetime.service.ports import (
    ClaimOutcome,
    JobEnding,
    JobFilter,
    NewJob,
    OpenPage,
    Page,
    StoredExecution,
    new_claim_token,
)

# SQLite's default limit of host parameters in one statement is 999 (3.40): ask for jobs in chunks below it.
IN_CHUNK = 500
ITERATION_PAGE = 100

# --- rows: the domain objects as JSON, every time in whole milliseconds like the DynamoDB items --------


_SPEC_FIELDS = set(JobSpec.model_fields)


def _ms(value: datetime | None) -> int | None:
    return None if value is None else to_ms(value)


def _time(value: Any) -> datetime | None:
    return None if value is None else from_ms(int(value))


def job_to_doc(job: Job) -> str:
    """The job as JSON: its definition as the API shows it, and its identity and lifecycle."""
    definition = job.model_dump_json(by_alias=True, include=_SPEC_FIELDS)
    identity = json.dumps(
        {
            "jobId": job.job_id,
            "owner": job.owner,
            "status": job.status.value,
            "version": job.version,
            "createdMs": to_ms(job.created_at),
            "updatedMs": to_ms(job.updated_at),
            "ownerGroups": list(job.owner_groups),
            "note": job.note,
        },
        separators=(",", ":"),
    )
    return '{"definition":' + definition + "," + identity[1:]


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
            "owner_groups": list(v.get("ownerGroups") or []),
            "note": v.get("note"),
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
            "claimToken": execution.claim_token,
            "payload": execution.payload,
            "runNumber": execution.run_number,
            "retryBase": execution.retry_base or None,
            "overlap": None if execution.overlap is None else execution.overlap.value,
            "waitedForLimitMs": execution.waited_for_limit_ms,
            "lateMs": _ms(execution.late_at),
            **checkpoint_attributes(execution),
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
        claim_token=v.get("claimToken"),
        payload=v.get("payload"),
        run_number=v.get("runNumber"),
        retry_base=int(v.get("retryBase") or 0),
        overlap=None if v.get("overlap") is None else Overlap(v["overlap"]),
        waited_for_limit_ms=v.get("waitedForLimitMs"),
        checkpoint=decode_checkpoint(v.get("checkpoint"), v.get("checkpointAttempt"), v.get("checkpointMs")),
        late_at=_time(v.get("lateMs")),
    )


def _held(values: dict[str, Any] | None, attempt: int, claim_token: str | None) -> bool:
    """True if the row still runs `attempt`, claimed with `claim_token` when one is given."""
    if values is None or values["status"] != RUNNING or values["attempt"] != attempt:
        return False
    stored = str(values.get("claimToken") or "")
    return claim_token is None or hmac.compare_digest(stored.encode(), claim_token.encode())


def _shard_of_key(key: ExecutionKey) -> str:
    """The row's `open` index key (the same `shard#spread` the DynamoDB adapter writes)."""
    return open_index_key(key)


def _epoch_seconds() -> int:
    return int(time.time())


SCHEDULED, RUNNING = ExecutionStatus.SCHEDULED.value, ExecutionStatus.RUNNING.value

# What a change inside a transaction returns: the row's new TTL (None: keep it), and whether it enters
# (True) or leaves (False) the `open` and `openByJob` sets, None leaving each as it is.
Change = tuple[int | None, bool | None, bool | None]

# Reads see a row whose TTL has passed as gone, as DynamoDB would once its TTL sweep ran.
LIVE = "(expires_at IS NULL OR expires_at > ?)"


class SqliteStore:
    """Jobs, executions and control records in one SQLite file; implements service.ports.Store."""

    def __init__(self, db: Database, settings: Settings, epoch_seconds: Callable[[], int] = _epoch_seconds) -> None:
        self.db = db
        self.settings = settings
        # TTL runs on the real clock, as DynamoDB's does, whatever clock the service is given.
        self.epoch_seconds = epoch_seconds
        self.bucket_shards = BucketShards(settings.shards, self._read_bucket_shards, self._fix_bucket_shards)

    def _expires_at(self, finished_at: datetime) -> int:
        return int((finished_at + timedelta(days=self.settings.history_retention_days)).timestamp())

    def key_of(self, execution: Execution) -> ExecutionKey:
        """Where the row lives: the partition of its due hour, with that hour's fixed shard count."""
        shards = self.bucket_shards.of(hour_bucket(execution.due_at))
        return ExecutionKey.for_due(execution.job_id, execution.execution_id, execution.due_at, shards)

    # -- jobs ----------------------------------------------------------------------------------------

    def create_job(
        self,
        job: Job,
        first: Execution | None,
        idempotency: dict[str, Any] | None = None,
        max_active_jobs: int | None = None,
        rate: RateWindow | None = None,
    ) -> None:
        """The job, its first execution, its idempotency record and the owner's quota counters (active jobs,
        and `rate`'s window when given) in one transaction; raises Conflict if any record exists already,
        QuotaExceeded if a counter is at its limit (nothing is written then)."""
        row = None if first is None else self._new_row(first)  # before the write: key_of may record a bucket
        with self.db.write() as conn:
            self._create_in(conn, NewJob(job, first, idempotency), row, max_active_jobs, rate)

    def create_jobs(
        self, jobs: Sequence[NewJob], max_active_jobs: int | None = None, rate: RateWindow | None = None
    ) -> list[DuetimeError | None]:
        """All the jobs in one write transaction, each inside a savepoint of its own: a job refused (Conflict,
        QuotaExceeded) is rolled back to its savepoint alone, so each job stays atomic with its execution,
        key and counters while the batch pays one BEGIN and one COMMIT (one fsync). The owner's counters are
        read once, checked job by job as create_job checks them, and written once with what the batch added:
        the transaction holds the write lock, so no one else moves them meanwhile."""
        outcomes: list[DuetimeError | None] = []
        rows = [None if new.first is None else self._new_row(new.first) for new in jobs]  # as in create_job
        if not jobs:
            return outcomes
        active_key = active_jobs_key(jobs[0].job.owner)
        with self.db.write() as conn:
            active = int((self._read_control(conn, active_key) or {}).get(COUNT_ATTR, 0))
            counted = 0 if rate is None else int((self._read_control(conn, rate.key) or {}).get(COUNT_ATTR, 0))
            written = 0
            for new, row in zip(jobs, rows, strict=True):
                assert active_jobs_key(new.job.owner) == active_key, "a batch is one owner's"
                conn.execute("SAVEPOINT new_job")
                try:
                    self._create_in(conn, new, row, max_active_jobs, rate, counters=False)
                    if max_active_jobs is not None and active + written >= max_active_jobs:
                        raise active_jobs_exceeded(max_active_jobs)
                    if rate is not None and counted + written >= rate.limit:
                        raise rate_exceeded(rate)
                except (Conflict, QuotaExceeded) as exc:
                    conn.execute("ROLLBACK TO new_job")
                    outcomes.append(exc)
                else:
                    outcomes.append(None)
                    written += 1
                conn.execute("RELEASE new_job")
            if written:
                self._count(conn, active_key, written)
                if rate is not None:
                    self._count(conn, rate.key, written, expires_at=rate.ends_at_s)
        return outcomes

    def _create_in(
        self,
        conn: sqlite3.Connection,
        new: NewJob,
        first_row: tuple[Any, ...] | None,
        max_active_jobs: int | None,
        rate: RateWindow | None,
        counters: bool = True,
    ) -> None:
        """create_job's writes inside the caller's transaction (the owner's counters too unless `counters` is
        False: create_jobs counts a batch once); raises (the caller rolls back) if refused."""
        job = new.job
        try:
            conn.execute(
                "INSERT INTO jobs (job_id, owner, created_key, doc) VALUES (?, ?, ?, ?)",
                (job.job_id, job.owner, created_key(job), job_to_doc(job)),
            )
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"job {job.job_id} already exists") from exc
        if first_row is not None and not self._insert(conn, first_row):
            raise Conflict(f"job {job.job_id} already exists")
        if new.idempotency is not None:
            record = {**new.idempotency, "jobId": job.job_id}
            if not self._insert_control(conn, str(record["key"]), record):
                raise Conflict(f"job {job.job_id} already exists")
        if not counters:
            return
        if not self._count(conn, active_jobs_key(job.owner), 1, max_active_jobs):
            assert max_active_jobs is not None
            raise active_jobs_exceeded(max_active_jobs)  # the transaction is rolled back: nothing written
        if rate is not None and not self._count(conn, rate.key, 1, rate.limit, rate.ends_at_s):
            raise rate_exceeded(rate)

    def get_job(self, job_id: str) -> Job | None:
        row = self.db.query_one("SELECT doc FROM jobs WHERE job_id = ?", (job_id,))
        return job_from_doc(row[0]) if row else None

    def get_jobs(self, job_ids: list[str]) -> dict[str, Job]:
        found: dict[str, Job] = {}
        unique = list(dict.fromkeys(job_ids))
        for start in range(0, len(unique), IN_CHUNK):
            chunk = unique[start : start + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for (doc,) in self.db.query(f"SELECT doc FROM jobs WHERE job_id IN ({marks})", chunk):
                job = job_from_doc(doc)
                found[job.job_id] = job
        return found

    def list_jobs(self, owner: str, limit: int, cursor: str | None, filters: JobFilter | None = None) -> Page[Job]:
        """The owner's jobs, newest first; the cursor names the last job shown and is bound to the owner.
        `filters` are applied in the query, within the owner's rows (status, handler, tags)."""
        scope = f"owner:{owner}"
        start = decode_cursor(scope, cursor, {"owner": owner, "jobId": None, "createdKey": None})
        sql = "SELECT doc, created_key FROM jobs WHERE owner = ?"
        args: list[Any] = [owner]
        if filters is not None:
            if filters.status is not None:
                sql += " AND json_extract(doc, '$.status') = ?"
                args.append(filters.status.value)
            if filters.handler is not None:
                sql += " AND json_extract(doc, '$.definition.handler') = ?"
                args.append(filters.handler)
            for key, value in filters.tags:  # keys are of TAG_KEY's characters (no quote): one JSON path step
                sql += " AND json_extract(doc, ?) = ?"
                args.extend([f'$.definition.tags."{key}"', value])
        if start:
            sql += " AND created_key < ?"
            args.append(start["createdKey"])
        rows = self.db.query(sql + " ORDER BY created_key DESC LIMIT ?", [*args, limit + 1])
        jobs = [job_from_doc(doc) for doc, _ in rows[:limit]]
        last = None
        if len(rows) > limit and jobs:
            last = {"owner": owner, "jobId": jobs[-1].job_id, "createdKey": rows[limit - 1][1]}
        return Page(items=jobs, cursor=encode_cursor(scope, last))

    def update_job_status(self, job: Job, status: JobStatus, now: datetime, note: str | None = None) -> Job:
        """Set a job's status and note (None clears it) if its version is still `job.version`; raises
        Conflict otherwise."""
        change = {"status": status, "updated_at": now, "version": job.version + 1, "note": note}
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
            stored = job_from_doc(row[0]) if row else None
            if stored is None or stored.version != job.version:
                raise Conflict(f"job {job.job_id} changed concurrently; try again")
            updated = stored.model_copy(update=change)
            conn.execute("UPDATE jobs SET doc = ? WHERE job_id = ?", (job_to_doc(updated), job.job_id))
            if status in ENDED_JOB_STATUSES and stored.status not in ENDED_JOB_STATUSES:
                self._count(conn, active_jobs_key(job.owner), -1)  # its place goes back to the owner
        return job.model_copy(update=change)

    def _change_job(self, conn: sqlite3.Connection, ending: JobEnding | None) -> None:
        """Apply `ending` (a one-off job completed or reopened) inside the caller's transaction, with its move
        of the owner's active-jobs counter, if the job stands in a status it moves from."""
        if ending is None:
            return
        row = conn.execute("SELECT doc FROM jobs WHERE job_id = ?", (ending.job.job_id,)).fetchone()
        stored = job_from_doc(row[0]) if row else None
        if stored is None or stored.status not in ending.from_statuses:
            return
        changed = ending.applied_to(stored)
        conn.execute("UPDATE jobs SET doc = ? WHERE job_id = ?", (job_to_doc(changed), stored.job_id))
        self._count(conn, active_jobs_key(stored.owner), ending.counter_delta)
        ending.changed = changed

    def scan_jobs(self) -> Iterator[Job]:
        """Every job (`duetime audit` only)."""
        rows = self.db.query("SELECT doc FROM jobs ORDER BY job_id")
        return (job_from_doc(doc) for (doc,) in rows)

    # -- executions: writes ------------------------------------------------------------------------------
    #
    # Inside a transaction (holding the file's write lock) a row is handled as its plain values: the
    # condition reads them and the change edits them, as DynamoDB's condition and update expressions do;
    # turning rows into domain objects happens before or after, so the lock is held for as short a time
    # as possible.

    def _new_row(self, execution: Execution) -> tuple[Any, ...]:
        key = self.key_of(execution)
        expires = self._expires_at(execution.finished_at) if execution.finished_at else None
        is_open = not execution.status.is_terminal
        open_shard, open_job = (_shard_of_key(key), execution.job_id) if is_open else (None, None)
        doc = execution_to_doc(execution)
        status = execution.status.value
        return (key.pk, key.sk, execution.job_id, execution.execution_id, status, open_shard, open_job, expires, doc)

    def _insert(self, conn: sqlite3.Connection, row: tuple[Any, ...]) -> bool:
        """Insert a new row unless a live one holds its key (an expired one is replaced, as after TTL)."""
        existing = conn.execute(
            f"SELECT 1 FROM executions WHERE pk = ? AND sk = ? AND {LIVE}", (row[0], row[1], self.epoch_seconds())
        ).fetchone()
        if existing:
            return False
        conn.execute(
            "INSERT OR REPLACE INTO executions "
            "(pk, sk, job_id, execution_id, status, open_shard, open_job, expires_at, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        return True

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

    def _values(self, conn: sqlite3.Connection, key: ExecutionKey) -> tuple[dict[str, Any], int | None] | None:
        """A live row's values and its TTL."""
        row = conn.execute(
            f"SELECT doc, expires_at FROM executions WHERE pk = ? AND sk = ? AND {LIVE}",
            (key.pk, key.sk, self.epoch_seconds()),
        ).fetchone()
        return None if row is None else (json.loads(row[0]), row[1])

    @staticmethod
    def _write_values(
        conn: sqlite3.Connection,
        key: ExecutionKey,
        values: dict[str, Any],
        expires_at: int | None,
        shard: bool | None = None,
        job: bool | None = None,
    ) -> str:
        """Write the row's values and TTL; `shard` and `job` put the row in (True) or take it out of (False)
        the `open` and `openByJob` sets, None leaves it as it is, as each DynamoDB update names them."""
        doc = json.dumps(values, separators=(",", ":"))
        sets, args = ["status = ?", "expires_at = ?", "doc = ?"], [values["status"], expires_at, doc]
        if shard is not None:
            sets.append("open_shard = ?")
            args.append(_shard_of_key(key) if shard else None)
        if job is not None:
            sets.append("open_job = ?")
            args.append(values["jobId"] if job else None)
        conn.execute(f"UPDATE executions SET {', '.join(sets)} WHERE pk = ? AND sk = ?", [*args, key.pk, key.sk])
        return doc

    def _fenced(
        self,
        key: ExecutionKey,
        attempt: int,
        change: Callable[[dict[str, Any]], Change],
        claim_token: str | None = None,
        ending: JobEnding | None = None,
    ) -> Execution:
        """Apply `change` to the row's values if `attempt` still holds the row (running under that attempt
        number, claimed with `claim_token` when given); it returns the new TTL (None: keep it) and the
        open-set changes. `ending` changes the job in the same transaction. Raises StaleAttempt otherwise."""
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if not _held(loaded[0] if loaded else None, attempt, claim_token):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
            assert loaded is not None
            values, expires = loaded
            new_expires, shard, job = change(values)
            expires = expires if new_expires is None else new_expires
            doc = self._write_values(conn, key, values, expires, shard, job)
            self._change_job(conn, ending)
        return execution_from_doc(doc)

    def claim(
        self,
        key: ExecutionKey,
        worker_id: str,
        now: datetime,
        lease_until: datetime,
        max_attempts: int = 2**31,
        first_only: bool = False,
    ) -> ClaimOutcome:
        """`scheduled` (or `running` with an ended lease and attempts left) -> `running`, attempt + 1; else
        the row as it stands (None if there is none). `first_only` (at-most-once): a row never claimed before
        only."""
        now_ms, lease_ms = to_ms(now), to_ms(lease_until)
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if loaded is None:
                return ClaimOutcome(claimed=None, current=None)
            values, expires = loaded
            lease = values["leaseUntilMs"]
            takeover = (
                values["status"] == RUNNING
                and lease is not None
                and lease <= now_ms
                and values["attempt"] < max_attempts
            )
            claimable = values["status"] == SCHEDULED or takeover
            if first_only:
                claimable = values["status"] == SCHEDULED and not values["attempt"]
            if claimable:
                entry = {"workerId": worker_id, "startedMs": now_ms, "finishedMs": None, "outcome": None, "error": None}
                values.update(
                    status=RUNNING,
                    attempt=values["attempt"] + 1,
                    workerId=worker_id,
                    leaseUntilMs=lease_ms,
                    startedMs=now_ms,
                    attempts=[*values["attempts"], entry],
                    claimToken=new_claim_token(),
                )
                self._write_values(conn, key, values, expires)
        execution = execution_from_values(values)
        if claimable:
            return ClaimOutcome(claimed=execution, current=None)
        return ClaimOutcome(claimed=None, current=execution)

    def heartbeat(
        self, key: ExecutionKey, attempt: int, lease_until: datetime, claim_token: str | None = None
    ) -> Execution:
        """Extend the lease of `attempt` (claimed with `claim_token`, when given); raises StaleAttempt if
        that attempt no longer holds the row or the token is not the claim's."""
        lease_ms = to_ms(lease_until)

        def extend(values: dict[str, Any]) -> Change:
            values["leaseUntilMs"] = lease_ms
            return None, None, None

        return self._fenced(key, attempt, extend, claim_token)

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
        now_ms, expires = to_ms(now), self._expires_at(now)

        def record(values: dict[str, Any]) -> Change:
            attempts = values["attempts"]
            if 0 <= attempt - 1 < len(attempts):
                attempts[attempt - 1].update(finishedMs=now_ms, outcome=outcome or status.value)
                if error is not None:
                    attempts[attempt - 1]["error"] = error
            values.update(status=status.value, finishedMs=now_ms, leaseUntilMs=None, error=error)
            if result is not None:
                values["result"] = result
            # A failure stays in the open set until its owner has been told (mark_notified), so the
            # reconciler can repeat a notice lost to a crash between this write and the DLQ send.
            return expires, None if status == ExecutionStatus.FAILED else False, False

        return self._fenced(key, attempt, record, claim_token, ending)

    def move_for_retry(self, key: ExecutionKey, attempt: int, moved: Execution, claim_token: str | None = None) -> None:
        """Move a failed attempt's row to the partition of its new due time in one transaction, fenced by
        the attempt (and its claim's token, when given); raises StaleAttempt if `attempt` no longer holds
        the old row or the new key is taken."""
        row = self._new_row(moved)
        with self.db.write() as conn:
            loaded = self._values(conn, key)
            if not _held(loaded[0] if loaded else None, attempt, claim_token):
                raise StaleAttempt(f"attempt {attempt} no longer holds {key.sk}")
            conn.execute("DELETE FROM executions WHERE pk = ? AND sk = ?", (key.pk, key.sk))
            if not self._insert(conn, row):
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
        now_ms, expires = to_ms(now), self._expires_at(now)

        def end(values: dict[str, Any]) -> Change:
            values.update(status=status.value, finishedMs=now_ms, skipReason=reason, leaseUntilMs=None)
            return expires, False, False

        return self._fenced(key, attempt, end, claim_token)

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

    def open_executions_of_job(self, job_id: str, due_by: datetime | None = None) -> list[Execution]:
        """The job's executions that have not ended (waiting, paused or running), earliest due first; with
        `due_by`, only those due by then."""
        bound = sort_key_after(due_by) if due_by is not None else "~"  # "~" sorts after every digit
        rows = self.db.query(
            f"SELECT doc FROM executions WHERE open_job = ? AND sk < ? AND {LIVE} ORDER BY sk",
            (job_id, bound, self.epoch_seconds()),
        )
        return [e for e in (execution_from_doc(doc) for (doc,) in rows) if not e.status.is_terminal]

    def scan_open_executions(self) -> Iterator[StoredExecution]:
        """Every scheduled or running execution, and every one still in the open set (`duetime audit`)."""
        rows = self.db.query(
            "SELECT pk, sk, open_shard, doc FROM executions "
            f"WHERE (status IN (?, ?) OR open_shard IS NOT NULL) AND {LIVE} ORDER BY pk, sk",
            (ExecutionStatus.SCHEDULED.value, ExecutionStatus.RUNNING.value, self.epoch_seconds()),
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
        with self.db.read() as conn:
            return self._read_control(conn, key)

    def get_controls(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        with self.db.read() as conn:
            records = {key: self._read_control(conn, key) for key in dict.fromkeys(keys)}
        return {key: record for key, record in records.items() if record is not None}

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

    def advance_cursor(self, key: str, owner: str, cursor_ms: int, reconcile_from: str | None = None) -> bool:
        """Move the lease holder's cursor forward and record where the reconciler goes on (`reconcile_from`,
        None: from the start), in one write; False if `owner` lost the lease meanwhile."""
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.get("leaseOwner") != owner:
                return False
            record["cursorMs"] = cursor_ms
            record.pop("leaseOwner", None)  # handed back: the next cycle, whatever its owner, takes the shard
            record.pop("leaseUntilMs", None)
            if reconcile_from:
                record["reconcileFrom"] = reconcile_from
            else:
                record.pop("reconcileFrom", None)
            self._write_control(conn, key, record)
            return True

    def release_lease(self, key: str, owner: str) -> bool:
        """Hand back `owner`'s lease on `key` without moving its cursor; False if `owner` did not hold it."""
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.get("leaseOwner") != owner:
                return False
            record.pop("leaseOwner", None)
            record.pop("leaseUntilMs", None)
            self._write_control(conn, key, record)
            return True

    # -- handler announcements ---------------------------------------------------------------------------

    def announce_handlers(self, job_class: str, worker_id: str, names: list[str], now_ms: int, until_ms: int) -> None:
        """Record that `worker_id` serves `names` for `job_class` until `until_ms`, and forget announcements
        that ended before `now_ms` (one `worker:<id>` entry per worker, as on DynamoDB)."""
        key = announcements_key(job_class)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            for attr in ended_announcers(record, now_ms):
                del record[attr]
            record[ANNOUNCER_PREFIX + worker_id] = {"names": sorted(set(names)), "untilMs": until_ms}
            self._write_control(conn, key, record)

    def withdraw_handlers(self, job_class: str, worker_id: str) -> None:
        """`worker_id` stops serving `job_class` (a clean shutdown): its announcement is removed."""
        key = announcements_key(job_class)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is not None and record.pop(ANNOUNCER_PREFIX + worker_id, None) is not None:
                self._write_control(conn, key, record)

    def announced_handlers(self, job_class: str, now_ms: int) -> set[str]:
        """The handler names announced for `job_class` by workers whose announcement is still live."""
        with self.db.read() as conn:
            record = self._read_control(conn, announcements_key(job_class)) or {}
        return served_names(record, now_ms)

    # -- named calendars: one control record per owner, one `calendar:<name>` entry per calendar ------------

    def get_calendars(self, owner: str) -> dict[str, Calendar]:
        with self.db.read() as conn:
            return calendars_from_record(self._read_control(conn, calendars_key(owner)) or {})

    def put_calendar(self, owner: str, calendar: Calendar) -> bool:
        key = calendars_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            new = CALENDAR_ATTR_PREFIX + calendar.name not in record
            record[CALENDAR_ATTR_PREFIX + calendar.name] = calendar_entry(calendar)
            self._write_control(conn, key, record)
            return new

    def delete_calendar(self, owner: str, name: str) -> bool:
        key = calendars_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.pop(CALENDAR_ATTR_PREFIX + name, None) is None:
                return False
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

    # -- per-owner quotas: counter records in the control table, as on DynamoDB (issue 14) ----------------

    def _count(
        self, conn: sqlite3.Connection, key: str, delta: int, limit: int | None = None, expires_at: int | None = None
    ) -> bool:
        """Add `delta` to the counter record `key` inside the caller's transaction; False (nothing
        written) if it stands at `limit` already."""
        record = self._read_control(conn, key) or {"key": key}
        count = int(record.get(COUNT_ATTR, 0))
        if limit is not None and count >= limit:
            return False
        record[COUNT_ATTR] = count + delta
        if expires_at is not None:
            record["expiresAt"] = expires_at
        self._write_control(conn, key, record)
        return True

    def count_request(self, window: RateWindow) -> None:
        """Count a request (`window.amount`) in the owner's rate `window`; raises QuotaExceeded if the window
        cannot take it whole."""
        with self.db.write() as conn:
            counted = self._count(conn, window.key, window.amount, window.counter_limit, window.ends_at_s)
        if not counted:
            raise rate_exceeded(window)

    def active_jobs(self, owner: str) -> int:
        """The owner's jobs not cancelled, as its counter record stands."""
        record = self.get_control(active_jobs_key(owner)) or {}
        return int(record.get(COUNT_ATTR, 0))

    # -- a job edited in place (PATCH /jobs/{id} with spec fields) ---------------------------------------

    def edit_job(self, edited: Job, replaced: list[ExecutionKey], first: Execution | None) -> None:
        """The edited job (if its stored version is still `edited.version - 1`), the replaced waiting rows
        deleted (each only if still `scheduled`) and `first` inserted, in one transaction; Conflict naming
        `version` and nothing written otherwise."""
        first_row = None if first is None else self._new_row(first)
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM jobs WHERE job_id = ?", (edited.job_id,)).fetchone()
            if row is None or job_from_doc(row[0]).version != edited.version - 1:
                raise Conflict(f"job {edited.job_id} changed since version {edited.version - 1}", field="version")
            for key in replaced:
                loaded = self._values(conn, key)
                if loaded is None or loaded[0]["status"] != SCHEDULED:
                    raise Conflict("a waiting run of the job started meanwhile; read it again", field="version")
                conn.execute("DELETE FROM executions WHERE pk = ? AND sk = ?", (key.pk, key.sk))
            if first_row is not None and not self._insert(conn, first_row):
                raise Conflict("the edited job's first run exists already", field="version")
            conn.execute("UPDATE jobs SET doc = ? WHERE job_id = ?", (job_to_doc(edited), edited.job_id))

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

    # -- rate limits and concurrency caps (issue 20): control records, as on DynamoDB ----------------------

    def record_limit_wait(
        self, key: ExecutionKey, attempt: int, waited_ms: int, claim_token: str | None = None
    ) -> Execution:
        """Add `waited_ms` to the row's waitedForLimitMs, fenced by the attempt (and its claim token)."""

        def add_wait(values: dict[str, Any]) -> Change:
            values["waitedForLimitMs"] = int(values.get("waitedForLimitMs") or 0) + waited_ms
            return None, None, None

        return self._fenced(key, attempt, add_wait, claim_token)

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

    def add_count(self, key: str, delta: int, expires_at: int) -> None:
        """Add `delta` to the counter record `key`, forgotten after `expires_at` (epoch seconds)."""
        with self.db.write() as conn:
            self._count(conn, key, delta, None, expires_at)

    def get_limits(self, owner: str) -> dict[str, RateLimit]:
        with self.db.read() as conn:
            return limits_from_record(self._read_control(conn, limits_key(owner)) or {})

    def put_limit(self, owner: str, limit: RateLimit) -> bool:
        key = limits_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            new = LIMIT_ATTR_PREFIX + limit.name not in record
            record[LIMIT_ATTR_PREFIX + limit.name] = limit_entry(limit)
            self._write_control(conn, key, record)
            return new

    def delete_limit(self, owner: str, name: str) -> bool:
        key = limits_key(owner)
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or record.pop(LIMIT_ATTR_PREFIX + name, None) is None:
                return False
            self._write_control(conn, key, record)
            return True

    def reserve_start(self, key: str, now_ms: int, interval_ms: float, burst: int) -> int:
        """Reserve one start in the bucket `key`, in one transaction (the write lock orders the callers)."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            stored = record.get(NEXT_START_ATTR)
            start, next_start = reserve_start(None if stored is None else int(stored), now_ms, interval_ms, burst)
            record[NEXT_START_ATTR] = next_start
            record["expiresAt"] = next_start // 1000 + CONTROL_IDLE_SECONDS  # an idle bucket is full: forget it
            self._write_control(conn, key, record)
            return start

    def acquire_slot(self, key: str, holder: str, capacity: int, now_ms: int, until_ms: int) -> bool:
        """Hold a slot of `key` for `holder` unless `capacity` live holds exist already (one transaction)."""
        with self.db.write() as conn:
            record = self._read_control(conn, key) or {"key": key}
            live = live_holders(record, now_ms)
            if holder_attr(holder) not in live and len(live) >= capacity:
                return False
            kept = {attr: until for attr, until in live.items() if attr != holder_attr(holder)}
            kept[holder_attr(holder)] = until_ms
            fresh: dict[str, Any] = {"key": key, **kept}
            fresh["expiresAt"] = max(kept.values()) // 1000 + CONTROL_IDLE_SECONDS
            self._write_control(conn, key, fresh)
            return True

    def renew_slot(self, key: str, holder: str, until_ms: int) -> None:
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is None or holder_attr(holder) not in record:
                return
            record[holder_attr(holder)] = until_ms
            record["expiresAt"] = max(int(record.get("expiresAt") or 0), until_ms // 1000 + CONTROL_IDLE_SECONDS)
            self._write_control(conn, key, record)

    def release_slot(self, key: str, holder: str) -> None:
        with self.db.write() as conn:
            record = self._read_control(conn, key)
            if record is not None and record.pop(holder_attr(holder), None) is not None:
                self._write_control(conn, key, record)

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
        now_ms = to_ms(now)
        lease_ms = None if lease_until is None else to_ms(lease_until)

        def record(values: dict[str, Any]) -> Change:
            values.update(checkpoint=checkpoint, checkpointAttempt=attempt, checkpointMs=now_ms)
            if lease_ms is not None:
                values["leaseUntilMs"] = lease_ms
            return None, None, None

        return self._fenced(key, attempt, record, claim_token)

    # -- shard counts per due-hour bucket (issue 18) ---------------------------------------------------

    def _read_bucket_shards(self, buckets: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self.db.read() as conn:
            for bucket in buckets:
                record = self._read_control(conn, bucket_shards_key(bucket))
                if record is not None:
                    found[bucket] = int(record["shards"])
        return found

    def _fix_bucket_shards(self, bucket: str, shards: int) -> int:
        """Fix `bucket` at `shards` unless a writer did first (then its count stands); returns the count.
        The largest count ever fixed is raised in the same transaction."""
        with self.db.write() as conn:
            record = self._read_control(conn, bucket_shards_key(bucket))
            if record is not None:
                return int(record["shards"])
            most = self._read_control(conn, MOST_SHARDS_KEY)
            if most is None or int(most["shards"]) < shards:
                self._write_control(conn, MOST_SHARDS_KEY, {"key": MOST_SHARDS_KEY, "shards": shards})
            self._write_control(conn, bucket_shards_key(bucket), {"key": bucket_shards_key(bucket), "shards": shards})
            return shards

    def shards_of_bucket(self, bucket: str) -> int:
        """The shard count of `bucket` (`YYYYMMDDHH`), fixed now with the configured count if not yet."""
        return self.bucket_shards.of(bucket)

    def recorded_shards(self, buckets: list[str]) -> dict[str, int]:
        """The shard counts of those of `buckets` that are fixed; a bucket not fixed holds no row."""
        return self.bucket_shards.recorded(buckets)

    def most_shards(self) -> int:
        """How many shards the pre-loader and reconciler visit: the configured count, or more if a bucket was
        fixed with more (before a reshard to fewer)."""
        record = self.get_control(MOST_SHARDS_KEY)
        return max(self.settings.shards, int(record["shards"]) if record else 0)

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
