"""Per-owner quotas on SQLite: counter records in the control table, changed in the job's own transaction."""

from __future__ import annotations

import sqlite3

from duetime.adapters.sqlite.base import LIVE, SqliteTables
from duetime.domain.models import to_ms
from duetime.domain.quotas import COUNT_ATTR, RateWindow, active_jobs_key, rate_exceeded
from duetime.service.ports import JobEnding


class SqliteQuotas(SqliteTables):
    """Each owner's active-jobs counter and its request-rate windows."""

    def _change_job(self, conn: sqlite3.Connection, ending: JobEnding | None) -> None:
        """Apply `ending` (a one-off job completed or reopened) inside the caller's transaction, with its move
        of the owner's active-jobs counter, if the job stands in a status it moves from. The document is
        changed in SQL, as DynamoDB's update expression changes the item (adapters/aws/executions.py): status,
        note, update time and version, on the condition of the status, whatever an edit changed meanwhile.
        Reading and rewriting the whole job in Python was a fifth of a finished one-off's CPU here."""
        if ending is None:
            return
        job = ending.job
        froms = [status.value for status in ending.from_statuses]
        changed = conn.execute(
            "UPDATE jobs SET doc = json_set(doc, '$.status', ?, '$.note', ?, '$.updatedMs', ?,"
            " '$.version', json_extract(doc, '$.version') + 1)"
            f" WHERE job_id = ? AND json_extract(doc, '$.status') IN ({', '.join('?' * len(froms))})",
            (ending.to_status.value, ending.note, to_ms(ending.now), job.job_id, *froms),
        )
        if changed.rowcount != 1:
            return
        self._count(conn, active_jobs_key(job.owner), ending.counter_delta)
        ending.changed = ending.applied_to(job)

    # -- per-owner quotas: counter records in the control table, as on DynamoDB (issue 14) ----------------

    def _count(
        self, conn: sqlite3.Connection, key: str, delta: int, limit: int | None = None, expires_at: int | None = None
    ) -> bool:
        """Add `delta` to the counter record `key` inside the caller's transaction; False (nothing
        written) if it stands at `limit` already."""
        if limit is None and expires_at is None:  # a plain move, in SQL (a one-off's ending moves one)
            moved = conn.execute(
                f"UPDATE control SET doc = json_set(doc, '$.{COUNT_ATTR}',"
                f" coalesce(json_extract(doc, '$.{COUNT_ATTR}'), 0) + ?) WHERE key = ? AND {LIVE}",
                (delta, key, self.epoch_seconds()),
            )
            if moved.rowcount == 1:
                return True
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

    def add_count(self, key: str, delta: int, expires_at: int) -> None:
        """Add `delta` to the counter record `key`, forgotten after `expires_at` (epoch seconds)."""
        with self.db.write() as conn:
            self._count(conn, key, delta, None, expires_at)
