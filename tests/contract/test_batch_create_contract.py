"""The stores' batch creation (issue 32): create_jobs writes many jobs of one owner, each atomic with its first
execution, idempotency record and the owner's counters, and answers each job on its own; run on every adapter
(on DynamoDB it writes them several a transaction, so a refusal inside a group must cost only its own job)."""

from __future__ import annotations

from datetime import timedelta

from duetime.domain.errors import Conflict, QuotaExceeded
from duetime.domain.quotas import ACTIVE_JOBS, JOB_CREATES_PER_MINUTE, rate_window
from duetime.service.dispatch import new_execution
from duetime.service.ports import NewJob

from tests.contract.conftest import make_job


def new_job(clock, n: int, key: str | None = None) -> NewJob:
    job = make_job(clock, job_id=f"j_{n:016x}", owner="alice")
    record = None if key is None else {"key": f"idem#alice#{key}", "bodyHash": "h", "expiresAt": 2_000_000_000}
    return NewJob(job, new_execution(job, clock() + timedelta(minutes=5)), record)


def written(store, new: NewJob) -> bool:
    """Whether the job and its first execution exist (both, or neither: a job is never half written)."""
    assert new.first is not None
    job, first = store.get_job(new.job.job_id), store.get_execution(store.key_of(new.first))
    assert (job is None) == (first is None), new.job.job_id
    return job is not None


def test_a_batch_writes_every_job_with_its_first_execution_key_and_counter(ports, clock):
    store = ports.store
    batch = [new_job(clock, n, key=f"k{n}" if n % 2 else None) for n in range(1, 121)]  # past a transaction's 100 items
    assert store.create_jobs(batch) == [None] * 120
    assert all(written(store, new) for new in batch)
    assert store.get_control("idem#alice#k1")["jobId"] == batch[0].job.job_id
    assert store.active_jobs("alice") == 120


def test_a_refused_job_costs_only_itself_and_its_neighbours_are_written(ports, clock):
    store = ports.store
    taken = new_job(clock, 1, key="taken")
    store.create_job(taken.job, taken.first, taken.idempotency)
    again = new_job(clock, 3, key="taken")  # its key exists: a duplicate of the first
    dup = new_job(clock, 5)
    batch = [new_job(clock, 2, key="a"), again, new_job(clock, 4), dup, NewJob(dup.job, dup.first)]
    outcomes = store.create_jobs(batch)
    assert outcomes[:4] == [None, outcomes[1], None, None] and isinstance(outcomes[1], Conflict)
    assert isinstance(outcomes[4], Conflict)  # the same job twice: the second is refused
    assert [written(store, new) for new in batch[:4]] == [True, False, True, True]
    assert store.get_control("idem#alice#taken")["jobId"] == taken.job.job_id
    assert store.active_jobs("alice") == 4  # the first job and the three written


def test_a_batch_past_a_quota_writes_exactly_the_jobs_that_fit(ports, clock):
    store = ports.store
    batch = [new_job(clock, n) for n in range(1, 6)]
    outcomes = store.create_jobs(batch, max_active_jobs=3)
    assert outcomes[:3] == [None, None, None]
    assert all(isinstance(o, QuotaExceeded) and o.field == ACTIVE_JOBS and o.retry_after for o in outcomes[3:])
    assert [written(store, new) for new in batch] == [True, True, True, False, False]
    assert store.active_jobs("alice") == 3

    window = rate_window("alice", JOB_CREATES_PER_MINUTE, 2, clock())
    more = [new_job(clock, n) for n in range(6, 9)]
    outcomes = store.create_jobs(more, max_active_jobs=10, rate=window)
    assert outcomes[:2] == [None, None]
    assert isinstance(outcomes[2], QuotaExceeded) and outcomes[2].field == JOB_CREATES_PER_MINUTE
    assert [written(store, new) for new in more] == [True, True, False]
    assert store.active_jobs("alice") == 5


def test_a_batch_s_idempotency_records_are_read_at_once_and_only_those_that_exist_come_back(ports, clock):
    store = ports.store
    keyed = [new_job(clock, n, key=f"r{n}") for n in range(1, 4)]
    store.create_jobs(keyed)
    wanted = [f"idem#alice#r{n}" for n in range(1, 121)]  # past one BatchGetItem's 100 keys
    found = store.get_controls([*wanted, "idem#alice#r1"])
    assert set(found) == {"idem#alice#r1", "idem#alice#r2", "idem#alice#r3"}
    assert found["idem#alice#r2"]["jobId"] == keyed[1].job.job_id and found["idem#alice#r2"]["bodyHash"] == "h"
    assert store.get_controls([]) == {}
