"""One SQLite database file shared by threads and processes: connections, write transactions, schema, wake-ups.

Settings, and why:
- WAL: readers never block the one writer, and several processes may open the file at once.
- synchronous=NORMAL: in WAL mode a commit is durable against a killed process (SIGKILL loses nothing
  committed) and the file is never corrupted; an OS crash or power loss may lose the last commits (those
  not yet checkpointed to the main file), which FULL would keep at ~10x the cost per commit (NOTES.md:
  ~12,000 inserts/s NORMAL against ~1,270 FULL on this machine).
- busy_timeout: another process holding the write lock makes a writer wait, not fail. Within a process
  writers queue on a lock of their own first, so SQLite's sleeping busy handler (steps of 1-100 ms) is
  only met between processes.
- One connection per thread (sqlite3 connections must not be used by two threads at once); every state
  change is one `BEGIN IMMEDIATE` transaction, so a read-check-write is atomic across processes, and a
  killed process's unfinished transaction is rolled back by the next opener. Nothing is held across a
  kill: SQLite's file locks die with the process.

Wake-ups: `wait_for_change` returns as soon as the file may have changed. A commit in this process wakes
waiters at once; a commit in another process is seen by one watcher thread per process polling
`PRAGMA data_version` (which changes when another connection commits) every WATCH_INTERVAL_SECONDS, only
while someone waits. Measured here: a data_version poll costs ~4 µs, so a 2 ms poll is well under 1% of a
core, and a send from another process is seen within ~2 ms (a wake-up socket would need a registry of
listening processes, and a lost datagram would leave a waiter asleep until its timeout).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_SECONDS = 10.0
WATCH_INTERVAL_SECONDS = 0.002
DATABASE_FILE = "duetime.sqlite3"

# Keys and sort orders mirror the DynamoDB tables of duetime.definitions: executions by due partition
# (`hour#shard`) and `dueMs#executionId`, a byJob index, and the sparse `open` index (open_shard is set
# while an execution is open, NULL once it has ended). Rows keep the domain object as JSON (`doc`); the
# columns are what keys, conditions and queries read.
SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_key TEXT NOT NULL,
    doc TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, created_key);

CREATE TABLE IF NOT EXISTS executions (
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    job_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    status TEXT NOT NULL,
    open_shard TEXT,
    expires_at INTEGER,
    doc TEXT NOT NULL,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS executions_by_job ON executions (job_id, execution_id);
CREATE INDEX IF NOT EXISTS executions_open ON executions (open_shard, sk) WHERE open_shard IS NOT NULL;

CREATE TABLE IF NOT EXISTS control (
    key TEXT PRIMARY KEY,
    expires_at INTEGER,
    doc TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT,
    sent_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (queue, visible_at_ms);
"""

# Threads of one process that opened the same file write one at a time (see the module docstring).
_process_write_locks: dict[str, threading.Lock] = {}
_process_write_locks_guard = threading.Lock()


def _write_lock_for(path: str) -> threading.Lock:
    with _process_write_locks_guard:
        return _process_write_locks.setdefault(path, threading.Lock())


class Database:
    """A SQLite file opened for duetime: per-thread connections, one-transaction writes, change wake-ups."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(Path(path).resolve())
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_guard = threading.Lock()
        self._write_lock = _write_lock_for(self.path)
        self._changed = threading.Condition()
        self._generation = 0
        self._waiters = 0
        self._watch_needed = threading.Event()
        self._closed = False
        self._watcher: threading.Thread | None = None
        with self.write() as conn:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)

    @classmethod
    def in_directory(cls, data_dir: str | Path) -> Database:
        """The database of a `--data-dir`."""
        return cls(Path(data_dir) / DATABASE_FILE)

    # -- connections and transactions ---------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        with self._connections_guard:
            self._connections.append(conn)
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (autocommit: each read outside `write` is its own snapshot)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise sqlite3.ProgrammingError("the database is closed")
            conn = self._open()
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self, wakes: bool = False) -> Iterator[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` transaction: committed if the block ends normally, rolled back if it raises.

        `wakes`: the change may make a message visible, so waiters of this process look again at once.
        """
        conn = self.connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        if wakes:
            self.notify_local()

    # -- wake-ups ------------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """A number that grows whenever the file may have changed (read it before looking, then wait)."""
        return self._generation

    def notify_local(self) -> None:
        """Wake this process's waiters now (a commit that may have made a message visible)."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def wait_for_change(self, seen: int, timeout: float) -> None:
        """Wait up to `timeout` seconds unless the generation has moved past `seen` (a commit here or in
        another process since the caller read it)."""
        if timeout <= 0:
            return
        with self._changed:
            if self._generation != seen:
                return
            self._waiters += 1
            self._watch_needed.set()
            self._ensure_watcher()
            try:
                self._changed.wait(timeout)
            finally:
                self._waiters -= 1

    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name="duetime-sqlite-watch", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        """Poll `PRAGMA data_version` while anyone waits; wake the waiters when another process committed."""
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        try:
            last = conn.execute("PRAGMA data_version").fetchone()[0]
            while not self._closed:
                self._watch_needed.wait(1.0)
                with self._changed:
                    if self._waiters == 0:
                        self._watch_needed.clear()
                        continue
                time.sleep(WATCH_INTERVAL_SECONDS)
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self.notify_local()
        finally:
            conn.close()

    def close(self) -> None:
        """Close every connection this object opened (each thread's) and stop the watcher."""
        self._closed = True
        self._watch_needed.set()
        with self._connections_guard:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        if self._watcher is not None:
            self._watcher.join(timeout=1)
