"""What the SQLite store's parts share, as adapters/aws/base.py for DynamoDB: the database and settings, the
row and control-record helpers every table's part writes through, and the TTL every read honours."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from duetime.adapters.shard_counts import BucketShards
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.items import execution_to_doc
from duetime.definitions import Settings
from duetime.domain.keys import MOST_SHARDS_KEY, ExecutionKey, bucket_shards_key, hour_bucket, open_index_key
from duetime.domain.models import Execution, ExecutionStatus

# SQLite's default limit of host parameters in one statement is 999 (3.40): ask for jobs in chunks below it.
IN_CHUNK = 500
ITERATION_PAGE = 100


def _shard_of_key(key: ExecutionKey) -> str:
    """The row's `open` index key (the same `shard#spread` the DynamoDB adapter writes)."""
    return open_index_key(key)


def _epoch_seconds() -> int:
    return int(time.time())


SCHEDULED, RUNNING = ExecutionStatus.SCHEDULED.value, ExecutionStatus.RUNNING.value

# Reads see a row whose TTL has passed as gone, as DynamoDB would once its TTL sweep ran.
LIVE = "(expires_at IS NULL OR expires_at > ?)"


class SqliteTables:
    """The database and the settings, with what the jobs, executions and control parts share: where a row
    lives, inserting and rewriting an execution row, and reading and writing control records."""

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

    # -- executions: writes ------------------------------------------------------------------------------
    #
    # Inside a transaction (holding the file's write lock) a row is handled as its plain values: the
    # condition reads them and the change edits them, as DynamoDB's condition and update expressions do;
    # turning rows into domain objects happens before or after, so the lock is held for as short a time
    # as possible. The writes of a running attempt (its claim, heartbeats, checkpoints, its end) go further:
    # one UPDATE each, condition and change (json_set) in SQL (executions.py), the document not read into
    # Python and written back.

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
