"""The jobs table on SQLite: creation (with the owner's quotas), reads, pages by owner, status changes and edits."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from duetime.adapters.cursors import decode_cursor, encode_cursor
from duetime.adapters.records import created_key
from duetime.adapters.sqlite.base import IN_CHUNK, SCHEDULED
from duetime.adapters.sqlite.items import job_from_doc, job_to_doc
from duetime.adapters.sqlite.quotas import SqliteQuotas
from duetime.domain.errors import Conflict, DuetimeError, QuotaExceeded
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import ENDED_JOB_STATUSES, Execution, Job, JobStatus
from duetime.domain.quotas import COUNT_ATTR, RateWindow, active_jobs_exceeded, active_jobs_key, rate_exceeded
from duetime.service.ports import JobFilter, NewJob, Page


class SqliteJobs(SqliteQuotas):
    """Jobs: created with their first executions in one transaction, read, listed, edited."""

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

    def get_jobs(self, job_ids: list[str], consistent: bool = True) -> dict[str, Job]:
        """Many jobs by id: always as committed (SQLite has one copy), whatever `consistent` asks."""
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

    def scan_jobs(self) -> Iterator[Job]:
        """Every job (`duetime audit` only)."""
        rows = self.db.query("SELECT doc FROM jobs ORDER BY job_id")
        return (job_from_doc(doc) for (doc,) in rows)

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
