"""The write lock between processes on one SQLite file: a `flock` on a file beside it, so a writer waiting for
another process is woken by the kernel the moment that one's transaction ends.

Why: SQLite lets one process write at a time, and a writer it turns away (`SQLITE_BUSY`) can only try again
after a pause (db.py: 0.2 ms, doubling to 2 ms). With two worker processes draining a burst, the lock was
often free while the waiter slept, and the other process, whose next transaction was ready sooner, took it
again: a second worker process drained a burst of 10,000 in 4.88 s against one's 5.11 s. Waiting on a
`flock`, it drained it in 4.14-4.91 s (docs/performance.md, "A lock file between writers"). SQLite's own lock
stays the rule (`BEGIN IMMEDIATE`); this lock only orders the writers that take it first, so a writer that
does not (the sqlite3 shell, an older duetime) is still waited for by SQLite's busy retries, and a filesystem
without `flock` leaves only those.

A `flock` is the process's until it closes the file or ends: a killed process (SIGKILL) holds nothing, as
with SQLite's own locks. One frozen while it holds the lock (SIGSTOP) must not stop the others for good,
and a blocking `flock` has no timeout, so a caller that finds the lock taken hands the blocking call to a
thread (the taker) and waits for it with its deadline: given up, it says so (db.py raises `Unavailable`),
and the taker, once the lock comes, gives it straight back unless another caller of this process waits.
A free lock, the common case, is one non-blocking call. The taker is one thread for the file's life, started
at the first wait: starting a thread at each wait cost the API process ~15% of its time serving POST /jobs
beside a draining worker (the starter waits until the new thread runs, which needs the GIL).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time

log = logging.getLogger("duetime.sqlite")

LOCK_SUFFIX = "-writer"  # beside SQLite's own -wal and -shm files


class FileLock:
    """An exclusive `flock` on `path`, taken by one thread of the process at a time (callers serialize on
    the process's own write lock first) and given up by the same caller."""

    def __init__(self, path: str, mode: int) -> None:
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        self._state = threading.Condition()
        self._held = False  # this file description holds the lock
        self._taking = False  # the taker thread is asked for the lock, or is in its blocking call
        self._waiting = 0  # callers waiting for the taker
        self._taker: threading.Thread | None = None
        self.usable = True

    def acquire(self, deadline: float) -> bool:
        """Take the lock by `deadline` (time.monotonic()); False if another process held it throughout. On a
        filesystem that has no `flock` it always succeeds (SQLite's busy retries order the writers)."""
        if not self.usable or self._fd is None:
            return True
        # Under the state's lock, so the taker (if one still waits in the kernel) sees whether a caller took
        # the lock meanwhile: its own flock then returns at once (this process's file holds it already), and
        # it must leave the lock to that caller, not give it back.
        with self._state:
            if self._held:  # the taker got it after an earlier caller had given up: this one has it
                return True
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            except OSError as exc:
                self.usable = False
                log.warning("no flock on the database's lock file (%s): writers wait by SQLite's retries", exc)
                return True
            else:
                self._held = True
                return True
        return self._wait(deadline)

    def _wait(self, deadline: float) -> bool:
        with self._state:
            self._waiting += 1
            try:
                if not self._taking:
                    self._taking = True
                    if self._taker is None:
                        self._taker = threading.Thread(target=self._takes, name="duetime-sqlite-lock", daemon=True)
                        self._taker.start()
                    self._state.notify_all()
                while self.usable and not self._held:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._state.wait(left)
                return True
            finally:
                self._waiting -= 1

    def _takes(self) -> None:
        """The taker's life: each time a caller asks (`_taking`), take the lock once; ends with the file."""
        while True:
            with self._state:
                while not self._taking and self._fd is not None and self.usable:
                    self._state.wait()
                fd = self._fd
                if fd is None or not self.usable:
                    self._taking = False
                    self._state.notify_all()
                    return
            self._take(fd)

    def _take(self, fd: int) -> None:
        """Wait for the lock on `fd` as long as it takes; keep it if a caller waits, else give it back."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            log.exception("waiting for the database's lock file failed")
            with self._state:
                self._taking = False
                self.usable = False
                self._state.notify_all()
            return
        with self._state:
            self._taking = False
            if self._fd != fd or self._held:  # closed meanwhile (the lock went with it), or a caller holds it
                return
            if self._waiting:
                self._held = True
                self._state.notify_all()
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def release(self) -> None:
        """Give the lock back (the caller holds it)."""
        with self._state:
            if self._held and self._fd is not None:
                self._held = False
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file (its lock, if held, goes with it)."""
        with self._state:
            fd, self._fd, self._held = self._fd, None, False
            self._state.notify_all()  # the taker, if idle, ends
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        """A Database dropped without close(): its lock file is closed with it, as its connections are."""
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
