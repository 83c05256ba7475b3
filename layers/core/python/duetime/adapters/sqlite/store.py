"""The SQLite store: jobs, executions and control records with the keys, conditions and errors of DynamoDB.

Every state change is one `BEGIN IMMEDIATE` transaction that reads the row, checks the same condition the
DynamoDB adapter writes in its ConditionExpression, and writes the new row; a failed condition raises the
same domain error (Conflict, StaleAttempt) or returns the same "not done" value. TTL (`expiresAt`, epoch
seconds as on DynamoDB) is honoured on read: an expired row reads as absent and may be replaced;
`sweep_expired` deletes such rows.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from duetime.adapters.sqlite.control import SqliteControl
from duetime.adapters.sqlite.executions import SqliteExecutions
from duetime.adapters.sqlite.jobs import SqliteJobs


class SqliteStore(SqliteJobs, SqliteExecutions, SqliteControl):
    """Jobs, executions and control records in one SQLite file; implements service.ports.Store.

    A module per table, as the DynamoDB store (adapters/aws/): jobs.py, executions.py, control.py, with
    quotas.py, base.py and items.py beneath them."""

    def batched(self) -> AbstractContextManager[None]:
        """The block's writes of this thread in one transaction (Database.batch): one commit and one wait for
        the write lock for several runs' claims or finishes."""
        return self.db.batch()

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
