"""SQLite due queues shared by several processes on one file: disjoint receives, wake-ups across processes,
and a killed or stopped receiver's messages coming back after their visibility (SQLite only: SQS is a
service, not a file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from duetime.adapters.sqlite import db as db_module
from duetime.adapters.sqlite.db import WATCH_IDLE_INTERVAL_SECONDS, WATCH_INTERVAL_SECONDS, Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.definitions import Settings
from duetime.domain.errors import Unavailable
from duetime.domain.keys import ExecutionKey
from duetime.service.ports import DueMessage

from tests.contract.conftest import wall_ms, wall_now
from tests.frozen_writer import frozen_duetime_writer, frozen_writer

CHILD = Path(__file__).with_name("sqlite_child.py")


@pytest.fixture
def backend() -> str:
    return "sqlite"  # these tests are about one file shared by processes


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "duetime.sqlite3")
    yield db
    db.close()


@pytest.fixture
def queues(database: Database) -> SqliteQueues:
    return SqliteQueues(database, Settings(shards=4))


class Child:
    """A receiver process and the lines it prints, read by a thread so the test never blocks on a pipe."""

    def __init__(self, db: Database, visibility: float, wait: float, idle_exit: float, mode: str = "") -> None:
        args = [sys.executable, str(CHILD), db.path, str(visibility), str(wait), str(idle_exit), mode]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.ready.wait(30), "the child process started"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "ready":
                self.ready.set()
            elif line.strip():
                self.lines.append(json.loads(line))

    def wait_for_lines(self, count: int, seconds: float) -> list[dict]:
        deadline = time.monotonic() + seconds
        while len(self.lines) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.lines)

    def finish(self, seconds: float = 30) -> list[dict]:
        self.process.wait(seconds)
        self.reader.join(5)
        return list(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.reader.join(5)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        if child.process.poll() is None:
            os.kill(child.process.pid, signal.SIGCONT)
        child.kill()


def message(n: int, due_in: float = 0.0) -> DueMessage:
    due = wall_ms() + round(due_in * 1000)
    execution_id = f"j_{n:016x}.{due:013d}"
    return DueMessage(
        key=ExecutionKey(pk="2026113009#001", sk=f"{due:013d}#{execution_id}"),
        execution_id=execution_id,
        job_id=f"j_{n:016x}",
        due_ms=due,
        job_class="default",
    )


def test_two_processes_receiving_from_one_file_get_disjoint_messages(database, queues, children):
    # Given two receiver processes on the file
    children += [Child(database, visibility=60, wait=1, idle_exit=3) for _ in range(2)]
    # When 300 messages are sent while they receive
    sent = [message(n) for n in range(300)]
    for start in range(0, len(sent), 10):
        queues.send(sent[start : start + 10], wall_now())
        time.sleep(0.005)
    # Then every message went to exactly one of them
    got = [[line["id"] for line in child.finish()] for child in children]
    assert sorted(got[0] + got[1]) == sorted(m.execution_id for m in sent)
    assert not set(got[0]) & set(got[1])


def test_a_killed_receivers_message_comes_back_after_its_visibility(database, queues, children):
    # Given a process that received a message with a 2 s visibility and then hangs on to it
    child = Child(database, visibility=2.0, wait=5, idle_exit=30, mode="hold")
    children.append(child)
    sent = message(1)
    sent_at = wall_ms()  # the child received it after this, so its visibility ends 2 s after, or later
    queues.send([sent], wall_now())
    assert len(child.wait_for_lines(1, 10)) == 1
    # When it is killed mid-visibility
    child.kill()
    # Then the message is hidden until the visibility ends, and then received again
    assert queues.receive("default", 10, 0, 30) == []
    [again] = queues.receive("default", 10, 5, 30)
    assert again.message == sent and again.receive_count == 2
    assert wall_ms() >= sent_at + 2000


def test_a_stopped_receiver_holds_no_lock_and_its_message_comes_back(database, queues, children):
    child = Child(database, visibility=3.0, wait=5, idle_exit=30, mode="hold")
    children.append(child)
    held = message(1)
    queues.send([held], wall_now())
    child.wait_for_lines(1, 10)
    # When the receiver is stopped (SIGSTOP), the file stays writable for everyone else
    os.kill(child.process.pid, signal.SIGSTOP)
    other = message(2)
    queues.send([other], wall_now())
    [received] = queues.receive("default", 10, 2, 30)
    assert received.message == other
    queues.delete("default", received.receipt)
    # And the stopped receiver's message comes back after its visibility
    [again] = queues.receive("default", 10, 5, 30)
    assert again.message == held and again.receive_count == 2


def test_a_send_from_one_process_wakes_a_receiver_waiting_in_another(database, queues, children):
    # Given a receiver process waiting up to 20 s
    child = Child(database, visibility=30, wait=20, idle_exit=30)
    children.append(child)
    time.sleep(0.5)
    # When a message due now is sent from this process
    now_message = message(1)
    sent_at = wall_ms()
    queues.send([now_message], wall_now())
    # Then the waiting receiver gets it well before its wait ends
    [first] = child.wait_for_lines(1, 10)
    assert first["id"] == now_message.execution_id
    assert first["at"] - sent_at < 2000
    # And a message sent with a delay reaches it at its due instant, not before
    delayed = message(2, due_in=0.8)
    queues.send([delayed], wall_now())
    second = child.wait_for_lines(2, 10)[1]
    assert second["id"] == delayed.execution_id
    assert delayed.due_ms <= second["at"] < delayed.due_ms + 2000


def test_a_commit_from_another_connection_after_a_look_wakes_the_waiter(database, tmp_path):
    # Given a second connection to the file, as another process has (data_version counts its commits)
    other = Database(database.path)
    try:
        for _ in range(2):  # the first wait starts the watcher, the second finds it running
            # When it commits between this process's look and its wait
            seen = database.generation
            with other.write() as conn:
                conn.execute("INSERT INTO control (key, doc) VALUES (?, '{}')", (f"k{time.monotonic_ns()}",))
            started = time.monotonic()
            database.wait_for_change(seen, 10)
            # Then the waiter is not left asleep until its timeout (a bound a loaded machine cannot cross)
            assert time.monotonic() - started < 5
    finally:
        other.close()


def test_an_idle_watcher_looks_less_and_less_often_and_at_once_again_after_a_commit(database, monkeypatch):
    """The watcher's pauses double while nothing commits, up to the idle pause (an idle worker process no longer
    wakes 500 times a second), and fall back to the shortest when another connection commits."""
    pauses: list[tuple[bool, float]] = []
    real = db_module.watch_interval_after

    def recorded(interval: float, changed: bool) -> float:
        pauses.append((changed, real(interval, changed)))
        return pauses[-1][1]

    monkeypatch.setattr(db_module, "watch_interval_after", recorded)
    other = Database(database.path)
    try:
        database.wait_for_change(database.generation, 0.01)  # starts the watcher
        deadline = time.monotonic() + 30
        while (False, WATCH_IDLE_INTERVAL_SECONDS) not in pauses and time.monotonic() < deadline:
            database.wait_for_change(database.generation, 0.5)  # nothing commits
        first_idle = pauses.index((False, WATCH_IDLE_INTERVAL_SECONDS))
        # Each look without a commit waited twice as long as the one before, from the shortest pause (counted from
        # the last look that saw a change, should the checkpoint thread's work have moved data_version)
        start = max((i + 1 for i, (changed, _) in enumerate(pauses[:first_idle]) if changed), default=0)
        assert [p for _, p in pauses[start : first_idle + 1]] == [
            min(WATCH_INTERVAL_SECONDS * 2 ** (i + 1), WATCH_IDLE_INTERVAL_SECONDS)
            for i in range(first_idle + 1 - start)
        ]

        def commit() -> None:
            time.sleep(0.1)
            with other.write() as conn:
                conn.execute("INSERT INTO control (key, doc) VALUES ('watched', '{}')")

        committer = threading.Thread(target=commit)
        seen = database.generation
        committer.start()
        started = time.monotonic()
        database.wait_for_change(seen, 10)
        committer.join()
        # The commit woke the waiter (a bound a loaded machine cannot cross), and the watcher looks often again
        assert time.monotonic() - started < 5
        assert (True, WATCH_INTERVAL_SECONDS) in pauses[first_idle:]
    finally:
        other.close()


def test_workers_killed_at_random_lose_no_message(database, queues, children):
    # Given three worker processes that delete each message once they have handled it
    def start() -> Child:
        child = Child(database, visibility=1.0, wait=1, idle_exit=4, mode="delete")
        children.append(child)
        return child

    workers = [start() for _ in range(3)]
    sent = [message(n) for n in range(400)]
    # When messages keep coming while one worker after another is killed (SIGKILL) and replaced
    for batch in range(40):
        queues.send(sent[batch * 10 : batch * 10 + 10], wall_now())
        time.sleep(0.02)
        if batch % 8 == 7:
            victim = workers.pop(0)
            victim.kill()
            workers.append(start())
    for child in workers:
        child.finish(60)
    # Then every message was handled at least once (a killed worker's came back after its visibility)
    handled = {line["id"] for child in children for line in child.lines}
    assert handled == {m.execution_id for m in sent}
    # And none is left behind: what a killed worker held was handled and deleted by another
    assert queues.depth("default") == 0


def refused_send(queues: SqliteQueues, monkeypatch: pytest.MonkeyPatch) -> DueMessage:
    """A send while another process holds the write lock: refused as unavailable (503) after the busy timeout
    (0.3 s here). Returns the message, not sent."""
    monkeypatch.setattr("duetime.adapters.sqlite.db.BUSY_TIMEOUT_SECONDS", 0.3)
    sent = message(1)
    with pytest.raises(Unavailable) as refused:
        queues.send([sent], wall_now())
    assert refused.value.retry_after == 1 and "write lock" in refused.value.message
    return sent


def test_a_process_frozen_mid_write_delays_writers_with_503_not_a_crash_and_a_new_process_still_opens(
    database, queues, monkeypatch
):
    # Given another process that took the write lock and was then frozen (SIGSTOP) holding it
    writer = frozen_writer(database.path)
    try:
        # When a process starts on the file meanwhile, it opens (the schema is current: it only reads)
        started = Database(database.path)
        started.close()
        # And a write waits for the lock up to the busy timeout, then says the store is unavailable
        sent = refused_send(queues, monkeypatch)
        # Then once the frozen process is resumed and ends, the same write goes through
        writer.send_signal(signal.SIGCONT)
        assert writer.wait(timeout=10) == 0
        queues.send([sent], wall_now())
        [got] = queues.receive("default", 10, 1, 30)
        assert got.message == sent
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGCONT)
            writer.kill()


def test_a_duetime_process_frozen_holding_the_lock_file_delays_writers_with_503_then_hands_it_on(
    database, queues, monkeypatch
):
    # Given another duetime process frozen (SIGSTOP) inside a write: it holds the lock file and SQLite's lock
    writer = frozen_duetime_writer(database.path)
    try:
        # When this process writes, it waits up to the busy timeout, then says the store is unavailable
        sent = refused_send(queues, monkeypatch)
        # And once the frozen process is resumed and ends, a third process writes: the lock this one's
        # waiting thread took when it came free was given back, as no caller here waited for it any more
        writer.send_signal(signal.SIGCONT)
        assert writer.wait(timeout=10) == 0
        layers = str(Path(__file__).resolve().parents[2] / "layers" / "core" / "python")
        sender = [sys.executable, "-c", ONE_SENDER, database.path, layers, "2"]  # waits 2 s at most for the lock
        assert subprocess.run(sender, timeout=30).returncode == 0
        # Then this process writes too, and both messages are there
        queues.send([sent], wall_now())
        assert queues.depth("default") == 2
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGCONT)
            writer.kill()


def test_a_duetime_process_killed_holding_the_lock_file_leaves_it_free(database, queues):
    # Given another duetime process frozen inside a write, holding the lock file and SQLite's lock
    writer = frozen_duetime_writer(database.path)
    # When it is killed (SIGKILL), its locks go with it
    writer.kill()
    writer.wait(timeout=10)
    # Then this process writes, its unfinished transaction rolled back
    queues.send([message(1)], wall_now())
    assert queues.depth("default") == 1


ONE_SENDER = """
import sys
sys.path.insert(0, sys.argv[2])
import duetime.adapters.sqlite.db as db
db.BUSY_TIMEOUT_SECONDS = float(sys.argv[3])
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.definitions import Settings
from duetime.domain.keys import ExecutionKey
from duetime.service.ports import DueMessage
from datetime import UTC, datetime
queues = SqliteQueues(db.Database(sys.argv[1]), Settings(shards=4))
key = ExecutionKey(pk="2026113009#001", sk="0000000000000#j_other.0000000000000")
queues.send([DueMessage(key, "j_other.0000000000000", "j_other", 0, "default")], datetime.now(UTC))
"""


LATER_SENDER = """
import sys, time
sys.path.insert(0, sys.argv[2])
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.definitions import Settings
from duetime.domain.keys import ExecutionKey
from duetime.service.ports import DueMessage
from datetime import UTC, datetime
queues = SqliteQueues(Database(sys.argv[1]), Settings(shards=4))
for n in range(20):  # each due 30 s from now: nothing a receiver waiting 2 s could take
    due = time.time_ns() // 10**6 + 30_000
    execution_id = f"j_{n:016x}.{due:013d}"
    key = ExecutionKey(pk="2026113009#001", sk=f"{due:013d}#{execution_id}")
    queues.send([DueMessage(key, execution_id, f"j_{n:016x}", due, "default")], datetime.now(UTC))
    time.sleep(0.02)
"""


def test_a_send_from_another_process_due_after_a_waiters_timeout_does_not_wake_it(database, queues):
    # Given a receiver waiting 2 s on an empty queue, counting each time it looks
    looks = []
    take = queues._take

    def counted(*args, **kwargs):
        looks.append(time.monotonic())
        return take(*args, **kwargs)

    queues._take = counted
    got: list = []
    waiter = threading.Thread(target=lambda: got.extend(queues.receive("default", 10, 2.0, 30)))
    waiter.start()
    # When another process commits 20 sends, each due 30 s from now
    layers = str(Path(__file__).resolve().parents[2] / "layers" / "core" / "python")
    done = subprocess.run([sys.executable, "-c", LATER_SENDER, database.path, layers], timeout=30)
    assert done.returncode == 0
    waiter.join(10)
    # Then it was not woken for them: it looked when it began (and once more when its watcher started),
    # not once per commit, and took nothing
    assert got == [] and len(looks) <= 3, len(looks)
