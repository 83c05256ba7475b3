"""Group commit on the SQLite file (a worker process's writers share one transaction while they queue for
the write lock): each write is still all-or-nothing, none returns before its commit, a failed one takes
only its own changes back, and a process that does not ask for it commits every write by itself."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from duetime.adapters.sqlite.db import Database
from duetime.domain.errors import Unavailable

WAIT_SECONDS = 10.0


def _database(path: Path, group_commit: bool) -> Database:
    db = Database(path, group_commit=group_commit)
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS rows (name TEXT PRIMARY KEY)")
    return db


def _committed(path: Path) -> set[str]:
    """The rows another connection sees: what has been committed."""
    conn = sqlite3.connect(path)
    try:
        return {name for (name,) in conn.execute("SELECT name FROM rows")}
    finally:
        conn.close()


def _wait_for_queued(db: Database, count: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while db._writers.queued < count:  # threads waiting for this process's write lock
        assert time.monotonic() < deadline, f"{count} writers never queued"
        time.sleep(0.001)


class Writes:
    """Threads each inserting one row, the first one holding the lock until the others queue behind it."""

    def __init__(self, db: Database, path: Path) -> None:
        self.db, self.path = db, path
        self.seen_at_body: dict[str, set[str]] = {}
        self.errors: dict[str, BaseException] = {}
        self.returned: dict[str, set[str]] = {}
        self.holding = threading.Event()  # the first write is in its block, holding the write lock

    def write(self, name: str, fail: bool = False, hold_until_queued: int = 0) -> None:
        try:
            with self.db.write() as conn:
                if hold_until_queued:
                    self.holding.set()
                    _wait_for_queued(self.db, hold_until_queued)
                self.seen_at_body[name] = _committed(self.path)
                conn.execute("INSERT INTO rows VALUES (?)", (name,))
                if fail:
                    raise ValueError(f"{name} fails after its insert")
            self.returned[name] = _committed(self.path)  # what is committed when the write returns
        except BaseException as exc:
            self.errors[name] = exc

    def run(self, *plans: tuple[str, bool]) -> None:
        """The first plan's write holds the lock until every other is queued; then all go on."""
        first = threading.Thread(target=self.write, args=(plans[0][0], plans[0][1], len(plans) - 1))
        first.start()
        assert self.holding.wait(WAIT_SECONDS)
        others = [threading.Thread(target=self.write, args=plan) for plan in plans[1:]]
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join(WAIT_SECONDS)
            assert not thread.is_alive()


def test_queued_writers_share_one_transaction_and_none_returns_before_its_commit(tmp_path):
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=True)
    writes = Writes(db, path)

    writes.run(("a", False), ("b", False), ("c", False))

    assert writes.errors == {}
    assert _committed(path) == {"a", "b", "c"}
    # The writes queued behind "a" ran in its transaction: "a" was not committed yet when they ran...
    assert "a" not in writes.seen_at_body["b"] | writes.seen_at_body["c"]
    # ...and each returned only once its own row was committed.
    for name, committed in writes.returned.items():
        assert name in committed
    db.close()


def test_a_write_that_fails_in_a_shared_transaction_takes_back_only_its_own_changes(tmp_path):
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=True)
    writes = Writes(db, path)

    writes.run(("a", False), ("b", True), ("c", False))

    assert set(writes.errors) == {"b"}
    assert isinstance(writes.errors["b"], ValueError)
    assert _committed(path) == {"a", "c"}
    db.close()


def test_the_first_write_of_a_shared_transaction_failing_leaves_the_queued_ones_to_commit(tmp_path):
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=True)
    writes = Writes(db, path)

    writes.run(("a", True), ("b", False), ("c", False))

    assert set(writes.errors) == {"a"}
    assert _committed(path) == {"b", "c"}
    db.close()


def test_without_group_commit_every_write_is_committed_before_the_next_one_runs(tmp_path):
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=False)
    writes = Writes(db, path)

    writes.run(("a", False), ("b", False), ("c", False))

    assert writes.errors == {}
    assert "a" in writes.seen_at_body["b"] and "a" in writes.seen_at_body["c"]
    assert _committed(path) == {"a", "b", "c"}
    db.close()


def test_a_commit_that_fails_fails_every_write_of_its_transaction(tmp_path):
    """A deferred constraint is checked at COMMIT: the shared commit fails, so no write of it returns as done."""
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=True)
    with db.write() as conn:
        conn.execute("CREATE TABLE parents (id TEXT PRIMARY KEY)")
        conn.execute("CREATE TABLE children (parent TEXT REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)")
    writer = db._writer
    assert writer is not None
    writer.execute("PRAGMA foreign_keys = ON")
    writes = Writes(db, path)
    original = writes.write

    def orphan_in_b(name: str, fail: bool = False, hold_until_queued: int = 0) -> None:
        if name != "b":
            return original(name, fail, hold_until_queued)
        try:
            with db.write() as conn:
                conn.execute("INSERT INTO children VALUES ('nobody')")  # fails the commit, not this statement
                conn.execute("INSERT INTO rows VALUES (?)", (name,))
        except BaseException as exc:
            writes.errors[name] = exc

    writes.write = orphan_in_b  # type: ignore[method-assign]
    writes.run(("a", False), ("b", False), ("c", False))

    assert set(writes.errors) == {"a", "b", "c"}
    assert all(isinstance(error, Unavailable) for error in writes.errors.values())
    assert _committed(path) == set()
    # The connection is usable again: the next write commits.
    with db.write() as conn:
        conn.execute("INSERT INTO rows VALUES ('d')")
    assert _committed(path) == {"d"}
    db.close()


@pytest.mark.parametrize("group_commit", [True, False])
def test_many_threads_writing_at_once_lose_nothing(tmp_path, group_commit):
    path = tmp_path / "db.sqlite3"
    db = _database(path, group_commit=group_commit)
    names = [f"r{thread}-{n}" for thread in range(8) for n in range(50)]

    def insert(mine: list[str]) -> None:
        for name in mine:
            with db.write() as conn:
                conn.execute("INSERT INTO rows VALUES (?)", (name,))

    threads = [threading.Thread(target=insert, args=(names[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS * 3)
    assert _committed(path) == set(names)
    db.close()
