"""The lock file between writers of one SQLite file (adapters/sqlite/file_lock.py), on a real file: two
FileLock objects are two open files, which `flock` keeps apart as it keeps two processes apart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from duetime.adapters.sqlite.file_lock import FileLock


def soon(seconds: float) -> float:
    return time.monotonic() + seconds


def locks(tmp_path: Path, count: int) -> list[FileLock]:
    return [FileLock(str(tmp_path / "db-writer"), 0o600) for _ in range(count)]


def test_a_writer_waits_for_the_holder_and_gets_the_lock_when_it_is_given_back(tmp_path):
    holder, waiter = locks(tmp_path, 2)
    assert holder.acquire(soon(1))
    # Given the lock held, a writer gives up at its deadline
    assert not waiter.acquire(soon(0.2))
    # When the holder gives it back, the next writer gets it
    holder.release()
    assert waiter.acquire(soon(5))
    # And the first one waits in turn
    assert not holder.acquire(soon(0.2))
    waiter.release()
    for lock in (holder, waiter):
        lock.close()


def test_the_lock_a_waiting_thread_takes_after_its_caller_gave_up_goes_back_to_the_others(tmp_path):
    holder, quitter, other = locks(tmp_path, 3)
    assert holder.acquire(soon(1))
    assert not quitter.acquire(soon(0.2))  # its taker thread still waits for the lock
    # When the holder gives it back, the quitter's taker takes it and, with no caller waiting, gives it back
    holder.release()
    assert other.acquire(soon(5))
    other.release()
    for lock in (holder, quitter, other):
        lock.close()


def test_a_caller_that_takes_the_lock_while_its_taker_waits_keeps_it(tmp_path):
    holder, writer, other = locks(tmp_path, 3)
    assert holder.acquire(soon(1))
    assert not writer.acquire(soon(0.2))  # its taker thread waits in the kernel
    # When the lock comes free, the writer takes it (itself, or from its taker)
    holder.release()
    assert writer.acquire(soon(5))
    time.sleep(0.2)  # the taker has returned from its wait by now
    # Then it still holds it: the taker did not give back a lock its caller holds
    assert not other.acquire(soon(0.2))
    writer.release()
    assert other.acquire(soon(5))
    other.release()
    for lock in (holder, writer, other):
        lock.close()


def test_a_lock_dropped_without_close_closes_its_file_and_gives_the_lock_back(tmp_path):
    dropped, other = locks(tmp_path, 2)
    assert dropped.acquire(soon(1))
    del dropped  # as a Database no one closed, once nothing refers to it
    assert other.acquire(soon(5))
    other.close()


def test_one_taker_thread_serves_every_wait_and_ends_with_the_file(tmp_path):
    before = set(threading.enumerate())
    holder, waiter = locks(tmp_path, 2)
    for _ in range(5):
        assert holder.acquire(soon(1))
        outcome: list[bool] = []
        thread = threading.Thread(target=lambda out=outcome: out.append(waiter.acquire(soon(5))))
        thread.start()
        deadline = soon(10)
        while not waiter._waiting and time.monotonic() < deadline:  # until the waiter is with its taker
            time.sleep(0.005)
        holder.release()
        thread.join(5)
        assert outcome == [True]
        waiter.release()
    takers = [t for t in set(threading.enumerate()) - before if t.name == "duetime-sqlite-lock"]
    assert len(takers) == 1  # one for the waiter's file, started at its first wait
    waiter.close()
    takers[0].join(5)
    assert not takers[0].is_alive()
    holder.close()
