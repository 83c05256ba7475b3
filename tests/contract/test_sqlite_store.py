"""What only the SQLite store has to show: TTL on read and by sweep (moto does not emulate DynamoDB's TTL),
claims racing across threads and processes, and commits that survive a SIGKILL of the writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.domain.errors import IdempotencyMismatch
from duetime.domain.models import ExecutionStatus, JobSpec, format_time
from duetime.service.dispatch import new_execution
from duetime.service.jobs import submit_job

from tests.contract.conftest import make_job

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def backend() -> str:
    return "sqlite"


class EpochClock:
    """The real clock TTL runs on, moved by hand."""

    def __init__(self) -> None:
        self.now = int(time.time())

    def __call__(self) -> int:
        return self.now


def test_an_expired_execution_reads_as_gone_its_slot_can_be_taken_again_and_a_sweep_deletes_it(ports, clock):
    epoch = EpochClock()
    store = SqliteStore(ports.store.db, ports.settings, epoch_seconds=epoch)
    job = make_job(clock)
    execution = new_execution(job, clock())
    key = store.key_of(execution)
    store.put_execution(execution)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    done = store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock())
    expires = int((done.finished_at + timedelta(days=ports.settings.history_retention_days)).timestamp())
    # Before its TTL it is read as usual
    epoch.now = expires - 1
    assert store.get_execution(key) == done
    assert [e.execution_id for e in store.iter_executions_of_job(job.job_id)] == [execution.execution_id]
    # Once its TTL has passed, no read sees it, and the slot may be created again
    epoch.now = expires
    assert store.get_execution(key) is None
    assert store.find_execution(job.job_id, execution.execution_id) is None
    assert store.list_executions(job.job_id, 10, None).items == []
    assert store.put_execution(execution) is True
    assert store.get_execution(key).status == ExecutionStatus.SCHEDULED
    # And a sweep deletes what has expired, nothing else
    store.end_waiting(key, ExecutionStatus.CANCELLED, clock.advance(3600))  # expires an hour later
    assert store.sweep_expired() == 0
    epoch.now = expires + 10**9
    assert store.sweep_expired() == 1
    assert ports.store.db.query_one("SELECT COUNT(*) FROM executions")[0] == 0


def test_an_expired_idempotency_key_reads_as_gone_and_may_be_used_again(ports, clock):
    epoch = EpochClock()
    store = SqliteStore(ports.store.db, ports.settings, epoch_seconds=epoch)
    record = {"key": "idem#alice#k", "bodyHash": "h", "expiresAt": epoch.now + 60}
    store.create_job(make_job(clock), None, record)
    twin = make_job(clock, job_id="j_0000000000000002")
    with pytest.raises(Exception, match="already exists"):
        store.create_job(twin, None, record)
    epoch.now += 60
    assert store.get_control("idem#alice#k") is None
    store.create_job(twin, None, {**record, "expiresAt": epoch.now + 60})
    assert store.get_control("idem#alice#k")["jobId"] == twin.job_id


def test_threads_racing_to_claim_one_row_leave_exactly_one_winner(ports, clock):
    store = ports.store
    execution = new_execution(make_job(clock), clock())
    store.put_execution(execution)
    key = store.key_of(execution)
    winners: list[str] = []
    start = threading.Barrier(8)

    def claim(worker: str) -> None:
        start.wait()
        if store.claim(key, worker, clock(), clock() + timedelta(seconds=30)).claimed is not None:
            winners.append(worker)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert store.get_execution(key).worker_id == winners[0]


CLAIMER = """
import json, sys
from datetime import UTC, datetime, timedelta
sys.path.insert(0, sys.argv[1])
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.domain.keys import ExecutionKey
store = SqliteStore(Database(sys.argv[2]), Settings(shards=4))
now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
won = []
for line in open(sys.argv[3]):
    pk, sk = line.split()
    if store.claim(ExecutionKey(pk=pk, sk=sk), sys.argv[4], now, now + timedelta(seconds=30)).claimed:
        won.append(sk)
print(json.dumps(won))
"""


def test_processes_racing_to_claim_the_same_rows_claim_each_exactly_once(ports, clock, tmp_path):
    store = ports.store
    job = make_job(clock)
    rows = [new_execution(job, clock() + timedelta(seconds=s)) for s in range(300)]
    store.put_executions(rows)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{store.key_of(e).pk} {store.key_of(e).sk}\n" for e in rows))
    args = [str(ROOT / "layers" / "core" / "python"), store.db.path, str(keys)]
    claimers = [
        subprocess.Popen([sys.executable, "-c", CLAIMER, *args, f"p{i}"], stdout=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    won = [json.loads(p.communicate(timeout=120)[0]) for p in claimers]
    assert sorted(sk for w in won for sk in w) == sorted(store.key_of(e).sk for e in rows)
    assert all(store.get_execution(store.key_of(e)).attempt == 1 for e in rows)


WRITER = """
import sys
from datetime import UTC, datetime, timedelta
sys.path.insert(0, sys.argv[1])
from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.domain.models import Job, JobSpec
from duetime.service.dispatch import new_execution
from duetime.service.jobs import submit_job
store = SqliteStore(Database(sys.argv[2]), Settings(shards=4))
now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
spec = JobSpec.model_validate({"name": "w", "handler": "demo.echo", "schedule": {"at": now}})
for i in range(10**9):
    job = Job(**spec.model_dump(), job_id=f"j_{i:016x}", owner="alice", created_at=now, updated_at=now)
    store.create_job(job, new_execution(job, now + timedelta(seconds=i)))
    print(job.job_id, flush=True)  # after the commit: this job was accepted
"""


def test_every_commit_survives_a_sigkill_of_the_writer_mid_load(tmp_path):
    path = tmp_path / "duetime.sqlite3"
    Database(path).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ROOT / "layers" / "core" / "python"), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    accepted = []
    for line in writer.stdout:
        accepted.append(line.strip())
        if len(accepted) == 300:
            os.kill(writer.pid, signal.SIGKILL)
            break
    accepted += [line.strip() for line in writer.stdout if line.strip()]
    writer.wait(10)
    db = Database(path)
    try:
        store = SqliteStore(db, Settings(shards=4))
        assert db.query_one("PRAGMA integrity_check")[0] == "ok"
        found = store.get_jobs(accepted)
        assert set(found) == set(accepted)
        assert all(store.executions_of_job(job_id) for job_id in accepted)
        # At most one job more: committed, killed before it said so
        assert len(accepted) <= len(list(store.scan_jobs())) <= len(accepted) + 1
        # And the killed writer left no lock behind (a held one would make this raise "database is locked")
        store.create_job(make_job(lambda: datetime(2026, 12, 1, 9, 0, tzinfo=UTC), job_id="j_ffffffffffffffff"), None)
        assert store.get_job("j_ffffffffffffffff") is not None
    finally:
        db.close()


def open_files_of(path: str) -> int:
    """How many file descriptors of this process have `path` open (its connections)."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == path)


def test_short_lived_threads_leave_no_connection_behind(ports, clock):
    # Given a server that reads on a new thread per request (as a threading HTTP server does)
    store = ports.store
    store.create_job(make_job(clock), None)
    before = open_files_of(store.db.path)
    for _ in range(100):
        thread = threading.Thread(target=store.get_job, args=("j_0000000000000001",))
        thread.start()
        thread.join()
    # Then the file is not held open once per thread that ever read it
    assert open_files_of(store.db.path) <= before + 8


def test_the_wal_is_checkpointed_into_the_database_file_in_the_background(ports, clock):
    # Given far fewer writes than SQLite's automatic checkpoint threshold would wait for
    store = ports.store
    size_before = os.path.getsize(store.db.path)
    for i in range(50):
        store.create_job(make_job(clock, job_id=f"j_{i + 1:016x}"), None)
    # Then the database file itself receives them soon, not only the WAL
    deadline = time.monotonic() + 10
    while os.path.getsize(store.db.path) <= size_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.getsize(store.db.path) > size_before


def test_a_file_of_an_earlier_schema_is_migrated_once_and_keeps_its_data(tmp_path, clock, monkeypatch):
    import duetime.adapters.sqlite.db as db_module

    # Given a file written at the first schema version, with a job in it
    path = tmp_path / "duetime.sqlite3"
    monkeypatch.setattr(db_module, "MIGRATIONS", db_module.MIGRATIONS[:1])
    first = Database(path)
    SqliteStore(first, Settings(shards=4)).create_job(make_job(clock), None)
    first.close()
    # When a later duetime adds a column and an index
    later = (
        *db_module.MIGRATIONS,
        "ALTER TABLE executions ADD COLUMN extra TEXT; CREATE INDEX extra ON executions (extra)",
    )
    monkeypatch.setattr(db_module, "MIGRATIONS", later)
    for _ in range(2):  # opened twice: the migration runs once
        db = Database(path)
        try:
            assert db.query_one("PRAGMA user_version")[0] == 2
            assert "extra" in [row[1] for row in db.query("PRAGMA table_info(executions)")]
            assert SqliteStore(db, Settings(shards=4)).get_job("j_0000000000000001") is not None
        finally:
            db.close()


def test_a_batch_commits_its_claims_together_and_a_failed_one_changes_nothing_of_the_others(ports, clock):
    # The receive loop claims the messages of one receive in one batch: each claim keeps its condition, one
    # that fails is undone alone, and nothing of the batch is visible to another connection before its end.
    store: SqliteStore = ports.store
    job = make_job(clock)
    runs = [new_execution(job, clock() + timedelta(seconds=i)) for i in range(3)]
    for run in runs:
        store.put_execution(run)
    keys = [store.key_of(run) for run in runs]
    lease_end = clock() + timedelta(seconds=30)
    store.claim(keys[1], "other", clock(), lease_end)  # held already: the batch's claim of it loses
    seen_inside: list[ExecutionStatus | None] = []
    with store.batched():
        assert store.claim(keys[0], "w1", clock(), lease_end).claimed is not None
        assert store.claim(keys[1], "w1", clock(), lease_end).claimed is None
        with pytest.raises(ZeroDivisionError), store.db.write() as conn:
            conn.execute("UPDATE executions SET doc = '{}' WHERE 1")  # every row, then undone by the raise
            raise ZeroDivisionError
        assert store.claim(keys[2], "w1", clock(), lease_end).claimed is not None
        # Another thread reads the committed state only: the batch's claims are not there yet.
        reader = threading.Thread(target=lambda: seen_inside.append(store.get_execution(keys[0]).status))
        reader.start()
        reader.join()
    assert seen_inside == [ExecutionStatus.SCHEDULED]
    holders = [store.get_execution(key).worker_id for key in keys]
    assert holders == ["w1", "other", "w1"]


def test_another_threads_write_waits_for_the_batch_and_a_batch_that_raises_commits_nothing(ports, clock):
    store: SqliteStore = ports.store
    job = make_job(clock)
    run, later = new_execution(job, clock()), new_execution(job, clock() + timedelta(seconds=1))
    store.put_execution(run)
    key = store.key_of(run)
    order: list[str] = []
    inside = threading.Event()

    def put_later() -> None:
        inside.wait(10)
        store.put_execution(later)
        order.append("other thread's write")

    writer = threading.Thread(target=put_later)
    writer.start()
    with pytest.raises(RuntimeError), store.batched():
        store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
        inside.set()
        time.sleep(0.3)  # the other thread's write is waiting for the lock the batch holds
        order.append("batch")
        raise RuntimeError("the worker died before its batch committed")
    writer.join(10)
    assert order == ["batch", "other thread's write"]
    assert store.get_execution(key).status == ExecutionStatus.SCHEDULED  # the claim was rolled back
    assert store.get_execution(store.key_of(later)) is not None


def test_a_job_due_within_the_horizon_is_stored_and_sent_in_one_commit_and_a_refused_one_sends_nothing(
    ports, clock, monkeypatch
):
    # POST /jobs waits for the write lock once, not twice, beside a worker's claims and ends: the job, its
    # first run and that run's message commit together (docs/performance.md, "750 one-offs a second").
    commits: list[str] = []
    real_commit = Database._commit

    def counted(self: Database, conn):  # type: ignore[no-untyped-def]
        commits.append("commit")
        real_commit(self, conn)

    monkeypatch.setattr(Database, "_commit", counted)
    at = format_time(clock.now + timedelta(seconds=10))
    spec = JobSpec.model_validate({"name": "once", "handler": "demo.echo", "schedule": {"at": at}})
    job, created = submit_job(ports, "alice", spec, idempotency_key="k1")
    assert created and commits == ["commit"]
    (message,) = ports.queues.receive("default", 10, 0, 30)  # the queue's visibility runs on the wall clock
    assert message.message.job_id == job.job_id
    # The same key with another body is refused before anything is written; the same body replays the job.
    other = JobSpec.model_validate({"name": "twice", "handler": "demo.echo", "schedule": {"at": at}})
    commits.clear()
    with pytest.raises(IdempotencyMismatch):
        submit_job(ports, "alice", other, idempotency_key="k1")
    assert submit_job(ports, "alice", spec, idempotency_key="k1") == (job, False)
    assert commits == []
    assert ports.queues.receive("default", 10, 0, 30) == []
