"""One SQLite database file shared by threads and processes: connections, write transactions, schema, wake-ups.

Settings, and why:
- WAL: readers never block the one writer, and several processes may open the file at once.
- synchronous=NORMAL: in WAL mode a commit is durable against a killed process (SIGKILL loses nothing
  committed) and the file is never corrupted; an OS crash or power loss may lose the last commits (those
  not yet checkpointed to the main file), which FULL would keep at ~10x the cost per commit (docs/measured.md:
  ~12,000 inserts/s NORMAL against ~1,270 FULL on this machine).
- Checkpoints off the commit path: a commit that crosses SQLite's automatic checkpoint threshold copies
  the WAL into the database and fsyncs both, which made ~1% of commits take 5-50 ms here and cost a
  fifth of the write time. A thread of each writing process checkpoints (PASSIVE: it never blocks a
  writer) every CHECKPOINT_INTERVAL_SECONDS instead; the automatic threshold stays, raised to
  CHECKPOINT_FALLBACK_PAGES, for when that thread falls behind.
- Another process holding the write lock makes a writer wait, not fail. Within a process writers queue on
  a lock of their own first. Between processes (`duetime local`'s API and its worker process write all the
  time) the writer connection does not use SQLite's busy handler, which sleeps in steps growing to 100 ms
  and made a busy API wait tens of milliseconds a write behind the workers. Writers of duetime's processes
  first wait on a `flock` beside the file (file_lock.py), which wakes the next one the moment the lock is
  free; `BEGIN IMMEDIATE` is then retried every WRITE_RETRY_SECONDS while a writer that does not take the
  flock holds SQLite's lock (up to BUSY_TIMEOUT_SECONDS in all). Readers keep the busy timeout.
- Connections: one writer connection per process (writes are serialized in the process anyway) and a
  small pool of reader connections lent to one thread at a time, so a server starting a thread per
  request does not hold the file open once per thread it ever ran. Every state change is one
  `BEGIN IMMEDIATE` transaction, so a read-check-write is atomic across processes, and a killed
  process's unfinished transaction is rolled back by the next opener. Nothing is held across a kill:
  SQLite's file locks die with the process.

Wake-ups: `wait_for_change` returns as soon as the file may have changed. A commit in this process wakes
waiters at once; a commit in another process is seen by one watcher thread per process polling
`PRAGMA data_version` (which changes when another connection commits) every WATCH_INTERVAL_SECONDS, only
while someone waits. On such a change the watcher reads the earliest instant a message of the waiters'
queues is visible (one indexed read) and wakes them only if one would otherwise sleep past it: the API's
process commits several times a job, and waking every receiver of the worker process on each commit, to
find nothing due yet, cost that process a tenth of a core at ~900 jobs/s. Measured on this 2-core machine
under load: a data_version poll costs ~4 µs; a process whose receivers wait idle spends ~2% of a core on
the watcher; a message sent from another process
reaches a waiting receiver 1 ms after the send (p50; 4 ms max over 40), and one sent 200 ms ahead is
received 1 ms after its due instant (p50; 2 ms max). A wake-up socket or fifo would need a registry of
listening processes kept right across SIGKILL, and a lost wake-up would leave a waiter asleep until its
timeout; polling a counter SQLite already keeps has neither problem.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duetime.adapters.sqlite.file_lock import LOCK_SUFFIX, FileLock
from duetime.domain.errors import Unavailable

log = logging.getLogger("duetime.sqlite")

BUSY_TIMEOUT_SECONDS = 10.0
WRITE_RETRY_SECONDS = (0.0002, 0.002)  # the first and the longest pause between tries for the write lock
# How often the watcher reads `PRAGMA data_version` while anyone waits: every WATCH_INTERVAL_SECONDS while other
# processes commit, and, each look that finds no commit, twice as long as the last, up to
# WATCH_IDLE_INTERVAL_SECONDS. Looking every 2 ms, an idle `duetime local` worker process took 2.8% of a core here
# (500 wake-ups a second, for nothing); with the idle pause, 0.6%. A message another process makes visible at once
# (a run-now, a one-off due now) is seen at most WATCH_IDLE_INTERVAL_SECONDS late after a quiet spell; one committed
# ahead of its time (the pre-loader's, a job due later) is seen long before it is due, and this process's own
# commits wake its waiters directly.
WATCH_INTERVAL_SECONDS = 0.002
WATCH_IDLE_INTERVAL_SECONDS = 0.05
NEVER_VISIBLE_MS = 2**62  # "no message of those queues": later than any waiter's deadline
DEADLINE_ROUNDING_MS = 2
MAX_IDLE_READERS = 8
CHECKPOINT_INTERVAL_SECONDS = 0.5
CHECKPOINT_FALLBACK_PAGES = 10_000
DATABASE_FILE = "duetime.sqlite3"

# Keys and sort orders mirror the DynamoDB tables of duetime.definitions: executions by due partition
# (`hour#shard`) and `dueMs#executionId`, a byJob index, the sparse `open` index (open_shard is set while
# an execution is open, NULL once it has ended or while its paused job holds it) and the sparse
# `openByJob` index (open_job is set while it is scheduled or running). Rows keep the domain object as JSON (`doc`); the
# columns are what keys, conditions and queries read.
#
# MIGRATIONS[i] takes a file from schema version i to i + 1 (`PRAGMA user_version`); a change to the
# schema is a new entry at the end (e.g. `ALTER TABLE executions ADD COLUMN ...; CREATE INDEX ...`), never
# an edit of an old one, so a file written by an earlier duetime opens with its data.
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
    open_job TEXT,
    expires_at INTEGER,
    doc TEXT NOT NULL,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS executions_by_job ON executions (job_id, execution_id);
CREATE INDEX IF NOT EXISTS executions_open ON executions (open_shard, sk) WHERE open_shard IS NOT NULL;
CREATE INDEX IF NOT EXISTS executions_open_by_job ON executions (open_job, sk) WHERE open_job IS NOT NULL;

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
# An owner's dead letters (the deadByOwner index): set on a failed row when its owner is told.
DEAD_LETTERS = """
ALTER TABLE executions ADD COLUMN dead_owner TEXT;
ALTER TABLE executions ADD COLUMN dead_key TEXT;
CREATE INDEX IF NOT EXISTS executions_dead_by_owner ON executions (dead_owner, dead_key) WHERE dead_owner IS NOT NULL;
"""
MIGRATIONS: tuple[str, ...] = (SCHEMA, DEAD_LETTERS)

# Threads of one process that opened the same file write one at a time (see the module docstring).
_process_write_locks: dict[str, threading.Lock] = {}
_process_write_locks_guard = threading.Lock()


def earliest_visible_ms(conn: sqlite3.Connection, queues: Iterable[str]) -> int | None:
    """The earliest instant (epoch ms) a message of `queues` is or becomes visible; None when they hold none."""
    names = tuple(queues)
    marks = ", ".join("?" * len(names))
    earliest = conn.execute(f"SELECT MIN(visible_at_ms) FROM messages WHERE queue IN ({marks})", names).fetchone()[0]
    return None if earliest is None else int(earliest)


def _busy() -> Unavailable:
    return Unavailable(f"the database was busy: another process held its write lock for {BUSY_TIMEOUT_SECONDS:g} s")


def _write_lock_for(path: str) -> threading.Lock:
    with _process_write_locks_guard:
        return _process_write_locks.setdefault(path, threading.Lock())


# The database holds every owner's jobs, payloads and results: its owner alone may read it.
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
JOURNAL_SUFFIXES = ("-wal", "-shm", "-journal")


def private_directory(path: Path) -> None:
    """Create `path` (its missing parents as usual) readable by its owner alone. A folder that exists
    already keeps its mode: it may be the user's own (the files duetime puts in it are private anyway)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE)
    except FileExistsError:
        return
    os.chmod(path, PRIVATE_DIR_MODE)  # as asked, whatever the umask


def private_database_file(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives its -wal and -shm files the
    database file's mode), and bring a file and journals an earlier version left 0644 down to 0600. Never
    follows a link planted under those names (the database's own path is resolved before); a file of
    another user's is left to fail at open."""
    for name in (path, *(path.with_name(path.name + suffix) for suffix in JOURNAL_SUFFIXES)):
        flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_CREAT if name == path else 0)
        try:
            descriptor = os.open(name, flags, PRIVATE_FILE_MODE)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            log.warning("%s is a symbolic link: left as it is", name)
            continue
        try:
            os.fchmod(descriptor, PRIVATE_FILE_MODE)
        except PermissionError:
            log.warning("cannot make %s private: it is not this user's", name)
        finally:
            os.close(descriptor)


@dataclass
class _Batch:
    """A thread's open `Database.batch()`: how deep, its transaction's connection once begun (the write lock
    held until it commits), and the wake-ups its writes asked for."""

    depth: int = 0
    conn: sqlite3.Connection | None = None
    wakes: list[int | None] = field(default_factory=list)


def watch_interval_after(interval: float, changed: bool) -> float:
    """The watcher's next pause after one of `interval`: the shortest after a commit, else twice as long, capped."""
    return WATCH_INTERVAL_SECONDS if changed else min(interval * 2, WATCH_IDLE_INTERVAL_SECONDS)


class Database:
    """A SQLite file opened for duetime: per-thread connections, one-transaction writes, change wake-ups.
    The file, its journals and a folder made for it are its owner's alone (0600, 0700)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(Path(path).resolve())
        private_directory(Path(self.path).parent)
        private_database_file(Path(self.path))
        self._idle_readers: list[sqlite3.Connection] = []
        self._pool_guard = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._checkpointer: threading.Thread | None = None
        self._written = threading.Event()
        self._write_lock = _write_lock_for(self.path)
        self._file_lock: FileLock | None = None  # between processes (file_lock.py), opened at the first write
        self._changed = threading.Condition()
        self._generation = 0
        self._waiters = 0
        # Each waiting thread's wall-clock instant (epoch ms) it wakes at by itself, and the queues it receives
        # from (None: it named none, so any commit elsewhere wakes it). A commit making a message visible only
        # at or after every deadline need wake no one (see notify_local).
        self._waits: list[tuple[int, tuple[str, ...] | None]] = []
        self._watch_needed = threading.Event()
        self._closed = False
        # Set by close(): the checkpointer's pause between rounds ends at once (a close used to wait out its
        # half second: every test on SQLite paid it in its teardown).
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self._thread_batch = threading.local()  # each thread's open batch() (see there)
        self._migrate()

    def _migrate(self) -> None:
        """Bring the file to the current schema, one migration per transaction (another process opening
        the file at the same time waits for the write lock, then finds the work done). A file already current
        is only read: a process starting while another holds the write lock (one frozen mid-write) starts."""
        if int(self.query_one("PRAGMA user_version")[0]) >= len(MIGRATIONS):
            return
        for version, migration in enumerate(MIGRATIONS):
            with self.write() as conn:
                if int(conn.execute("PRAGMA user_version").fetchone()[0]) > version:
                    continue
                for statement in migration.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version + 1}")

    @classmethod
    def in_directory(cls, data_dir: str | Path) -> Database:
        """The database of a `--data-dir`."""
        return cls(Path(data_dir) / DATABASE_FILE)

    # -- connections and transactions ---------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._closed:
            raise sqlite3.ProgrammingError("the database is closed")
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A reader connection for this thread until the block ends (autocommit: each statement reads one
        snapshot). Fetch every row inside the block."""
        with self._pool_guard:
            conn = self._idle_readers.pop() if self._idle_readers else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            with self._pool_guard:
                keep = not self._closed and len(self._idle_readers) < MAX_IDLE_READERS
                if keep:
                    self._idle_readers.append(conn)
            if not keep:
                conn.close()

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read."""
        with self.read() as conn:
            return conn.execute(sql, args).fetchall()

    def query_one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """The first row of one read, or None."""
        with self.read() as conn:
            cursor = conn.execute(sql, args)
            try:
                return cursor.fetchone()
            finally:
                cursor.close()

    @contextmanager
    def write(self, wakes: bool = False, visible_at_ms: int | None = None) -> Iterator[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` transaction: committed if the block ends normally, rolled back if it raises.
        Inside this thread's `batch()` it is a savepoint of the batch's transaction instead: its changes are
        undone alone if it raises, and committed with the batch's.

        `wakes`: the change may make a message visible, so waiters of this process look again (at once, or
        only if one would sleep past `visible_at_ms`, the earliest instant a message it wrote is visible).
        """
        batch = self._batch
        if batch.depth > 0:
            with self._in_batch(batch) as conn:
                yield conn
            if wakes:
                batch.wakes.append(visible_at_ms)
            return
        with self._write_lock:
            conn = self._begin()
            try:
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                self._commit(conn)
            finally:
                self._release_file_lock()
        self._written.set()
        if wakes:
            self.notify_local(visible_at_ms)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes this thread makes inside the block share one transaction, begun at the first of them
        and committed at the block's end (each write a savepoint of it): a worker claiming or finishing
        several runs at once commits once, and the other threads wait for the write lock once, not at each
        run. A crash before the commit loses the batch's writes together, as it would lose each alone: their
        messages come back. Nested batches are one batch."""
        batch = self._batch
        batch.depth += 1
        try:
            yield
        except BaseException:
            if batch.depth == 1:
                self._end_batch(batch, commit=False)
            raise
        finally:
            batch.depth -= 1
        if batch.depth > 0:
            return
        wakes = self._end_batch(batch, commit=True)
        self._written.set()
        if wakes:
            self.notify_local(None if None in wakes else min(w for w in wakes if w is not None))

    def _end_batch(self, batch: _Batch, commit: bool) -> list[int | None]:
        """Commit (or roll back) the batch's transaction, if it began one, and release the write lock; returns
        the wake-ups its writes asked for (none when rolled back)."""
        conn, batch.conn = batch.conn, None
        wakes, batch.wakes = batch.wakes, []
        if conn is None:
            return []
        try:
            if commit:
                self._commit(conn)
            else:
                conn.execute("ROLLBACK")
        finally:
            self._release_file_lock()
            self._write_lock.release()
        return wakes if commit else []

    @property
    def _batch(self) -> _Batch:
        batch: _Batch | None = getattr(self._thread_batch, "batch", None)
        if batch is None:
            batch = self._thread_batch.batch = _Batch()
        return batch

    @contextmanager
    def _in_batch(self, batch: _Batch) -> Iterator[sqlite3.Connection]:
        """A savepoint of this thread's batch transaction (begun now if this is its first write)."""
        if batch.conn is None:
            self._write_lock.acquire()
            try:
                batch.conn = self._begin()
            except BaseException:
                self._write_lock.release()
                raise
        conn = batch.conn
        conn.execute("SAVEPOINT batched")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO batched")
            conn.execute("RELEASE batched")
            raise
        conn.execute("RELEASE batched")

    def _begin(self) -> sqlite3.Connection:
        """The writer connection (opened at the first write) in a new `BEGIN IMMEDIATE` transaction, the lock
        between processes taken first (file_lock.py); the caller holds this process's write lock and releases
        the other with `_release_file_lock` once the transaction has ended."""
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        if self._file_lock is None:
            self._file_lock = FileLock(self.path + LOCK_SUFFIX, PRIVATE_FILE_MODE)
        if not self._file_lock.acquire(deadline):
            raise _busy()
        try:
            return self._begin_transaction(deadline)
        except BaseException:
            self._release_file_lock()
            raise

    def _release_file_lock(self) -> None:
        if self._file_lock is not None:
            self._file_lock.release()

    def _begin_transaction(self, deadline: float) -> sqlite3.Connection:
        if self._writer is None:
            self._writer = self._open()
            self._writer.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_FALLBACK_PAGES}")
            self._writer.execute("PRAGMA busy_timeout=0")  # _begin waits for the lock (see the docstring)
            self._checkpointer = threading.Thread(
                target=self._checkpoint, name="duetime-sqlite-checkpoint", daemon=True
            )
            self._checkpointer.start()
        self._retry_busy(self._writer, "BEGIN IMMEDIATE", deadline)
        return self._writer

    def _commit(self, conn: sqlite3.Connection) -> None:
        try:
            self._retry_busy(conn, "COMMIT")  # a busy COMMIT leaves the transaction open: try again
        except BaseException:
            conn.execute("ROLLBACK")  # still busy at the deadline: the connection must not stay mid-transaction
            raise

    @staticmethod
    def _retry_busy(conn: sqlite3.Connection, statement: str, deadline: float | None = None) -> None:
        """Run `statement`, trying again after a short pause while another process holds the lock (until
        `deadline`, time.monotonic(); BUSY_TIMEOUT_SECONDS from now by default)."""
        pause, longest = WRITE_RETRY_SECONDS
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS if deadline is None else deadline
        while True:
            try:
                conn.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                if time.monotonic() > deadline:
                    raise _busy() from exc
            time.sleep(pause)
            pause = min(pause * 2, longest)

    # -- wake-ups ------------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """A number that grows whenever the file may have changed (read it before looking, then wait)."""
        return self._generation

    def notify_local(self, visible_at_ms: int | None = None) -> None:
        """Tell this process's waiters that a commit may have made a message visible (at `visible_at_ms`,
        epoch ms; None: now or unknown). The generation always moves, so a thread about to wait looks again;
        threads already asleep are woken only if one of them would sleep past that instant. At 500 jobs/s
        submitted seconds ahead, waking every receiver on every send cost a tenth of the API's time in
        thread hand-offs, each wake-up to find nothing visible yet."""
        with self._changed:
            self._generation += 1
            if visible_at_ms is None or any(deadline > visible_at_ms for deadline, _ in self._waits):
                self._changed.notify_all()

    def wait_for_change(self, seen: int, timeout: float, queues: Sequence[str] | None = None) -> None:
        """Wait up to `timeout` seconds unless the generation has moved past `seen` (a commit here or in
        another process since the caller read it). A caller waiting for messages names its `queues`: a
        commit in another process then wakes it only if a message of theirs is visible before its timeout."""
        if timeout <= 0:
            return
        with self._changed:
            self._ensure_watcher()
            if self._generation != seen:
                return
            self._waiters += 1
            deadline = time.time_ns() // 1_000_000 + math.ceil(timeout * 1000)
            wait = (deadline, tuple(queues) if queues is not None else None)
            self._waits.append(wait)
            self._watch_needed.set()
            try:
                self._changed.wait(timeout)
            finally:
                self._waiters -= 1
                self._waits.remove(wait)

    def _ensure_watcher(self) -> None:
        """Start the watcher once, from its first baseline. A commit between a caller's look and that
        baseline would go unseen, so starting it counts as a change: the caller looks once more."""
        if self._watcher is not None or self._closed:
            return
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        baseline = int(conn.execute("PRAGMA data_version").fetchone()[0])
        self._watcher = threading.Thread(
            target=self._watch, args=(conn, baseline), name="duetime-sqlite-watch", daemon=True
        )
        self._watcher.start()
        self._generation += 1

    def _watch(self, conn: sqlite3.Connection, last: int) -> None:
        """Poll `PRAGMA data_version` while anyone waits; wake the waiters when another process committed.
        Between waits it does not poll, and its baseline stays put, so a commit made meanwhile is still
        seen as a change at the next poll."""
        interval = WATCH_INTERVAL_SECONDS
        try:
            while not self._closed:
                self._watch_needed.wait(1.0)
                with self._changed:
                    if self._waiters == 0:
                        self._watch_needed.clear()
                        continue
                time.sleep(interval)
                try:
                    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
                except sqlite3.Error:  # waiters still wake at their own timeouts; look again next time
                    log.exception("could not read the database's data_version")
                    continue
                interval = watch_interval_after(interval, changed=version != last)
                if version != last:
                    last = version
                    visible = self._earliest_visible(conn)
                    # A waiter's deadline is its earliest message's instant rounded up: not a reason to wake it.
                    self.notify_local(None if visible is None else visible + DEADLINE_ROUNDING_MS)
        finally:
            conn.close()

    def _earliest_visible(self, conn: sqlite3.Connection) -> int | None:
        """For the watcher, after another process committed: the earliest instant (epoch ms) a message of the
        waiters' queues is visible, NEVER_VISIBLE_MS when they hold none, or None (wake everyone) when a
        waiter named no queues or the read fails."""
        with self._changed:
            named = [queues for _, queues in self._waits]
        if not named or any(queues is None for queues in named):
            return None
        try:
            earliest = earliest_visible_ms(conn, {queue for queues in named if queues for queue in queues})
        except sqlite3.Error:
            log.exception("could not read when the next message is visible")
            return None
        return NEVER_VISIBLE_MS if earliest is None else earliest

    def _checkpoint(self) -> None:
        """Checkpoint the WAL after this process wrote, at most every CHECKPOINT_INTERVAL_SECONDS."""
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        try:
            while not self._closed:
                self._written.wait(1.0)
                if self._closed or not self._written.is_set():
                    continue
                self._written.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or locked: the next round (or the fallback threshold) does it
                    log.debug("checkpoint skipped", exc_info=True)
                self._closing.wait(CHECKPOINT_INTERVAL_SECONDS)
        finally:
            conn.close()

    def close(self) -> None:
        """Close this object's connections and stop its watcher."""
        self._closed = True
        self._closing.set()
        self._watch_needed.set()
        with self._pool_guard:
            idle, self._idle_readers = self._idle_readers, []
        for conn in idle:
            conn.close()
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._file_lock is not None:
                self._file_lock.close()
                self._file_lock = None
        self._written.set()
        for thread in (self._watcher, self._checkpointer):
            if thread is not None:
                thread.join(timeout=2)
