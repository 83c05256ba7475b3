"""The stores' per-owner quota counters (issue 14), written once and run on every adapter: the active-jobs
counter moves in the job's own transaction, and a rate window's counter refuses past its limit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import Conflict, QuotaExceeded
from duetime.domain.models import JobStatus
from duetime.domain.quotas import ACTIVE_JOBS, JOB_CREATES_PER_MINUTE, RUN_NOWS_PER_MINUTE, rate_window
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job


def job_and_first(clock, n: int, owner: str = "alice"):
    job = make_job(clock, job_id=f"j_{n:016x}", owner=owner)
    return job, new_execution(job, clock() + timedelta(minutes=5))


def test_creating_counts_the_owners_jobs_and_refuses_past_the_limit_writing_nothing(ports, clock):
    store = ports.store
    for n in (1, 2):
        store.create_job(*job_and_first(clock, n), max_active_jobs=2)
    assert store.active_jobs("alice") == 2
    third, third_first = job_and_first(clock, 3)
    with pytest.raises(QuotaExceeded) as refused:
        store.create_job(third, third_first, max_active_jobs=2)
    assert refused.value.field == ACTIVE_JOBS and refused.value.retry_after > 0
    # Nothing of the refused transaction was written, and other owners have their own counter
    assert store.get_job(third.job_id) is None
    assert store.get_execution(store.key_of(third_first)) is None
    assert store.active_jobs("alice") == 2
    store.create_job(*job_and_first(clock, 4, owner="bob"), max_active_jobs=2)
    assert store.active_jobs("bob") == 1


def test_cancelling_gives_the_place_back_once_and_pausing_keeps_it(ports, clock):
    store = ports.store
    job, first = job_and_first(clock, 1)
    store.create_job(job, first, max_active_jobs=1)
    paused = store.update_job_status(job, JobStatus.PAUSED, clock())
    assert store.active_jobs("alice") == 1
    cancelled = store.update_job_status(paused, JobStatus.CANCELLED, clock())
    assert store.active_jobs("alice") == 0
    # A stale cancel (an old version) changes nothing, the counter included
    with pytest.raises(Conflict):
        store.update_job_status(paused, JobStatus.CANCELLED, clock())
    assert store.active_jobs("alice") == 0
    assert store.get_job(job.job_id).status == JobStatus.CANCELLED == cancelled.status
    store.create_job(*job_and_first(clock, 2), max_active_jobs=1)  # the place is free again


def test_a_conflicting_creation_is_a_conflict_not_a_quota_and_counts_nothing(ports, clock):
    store = ports.store
    job, first = job_and_first(clock, 1)
    store.create_job(job, first, max_active_jobs=5)
    with pytest.raises(Conflict) as refused:
        store.create_job(job, new_execution(job, clock() + timedelta(minutes=9)), max_active_jobs=5)
    assert not isinstance(refused.value, QuotaExceeded)
    assert store.active_jobs("alice") == 1


def test_a_rate_window_counts_creations_in_their_transaction_and_the_next_window_starts_afresh(ports, clock):
    store = ports.store
    window = rate_window("alice", JOB_CREATES_PER_MINUTE, 2, clock())
    for n in (1, 2):
        store.create_job(*job_and_first(clock, n), rate=window)
    third, third_first = job_and_first(clock, 3)
    with pytest.raises(QuotaExceeded) as refused:
        store.create_job(third, third_first, rate=window)
    assert refused.value.field == JOB_CREATES_PER_MINUTE
    assert 1 <= refused.value.retry_after <= 60
    assert store.get_job(third.job_id) is None and store.active_jobs("alice") == 2
    # A minute on, the owner's next window has room
    store.create_job(
        third, third_first, rate=rate_window("alice", JOB_CREATES_PER_MINUTE, 2, clock() + timedelta(minutes=1))
    )


def test_counted_requests_are_refused_past_the_windows_limit_and_each_owner_has_its_own(ports, clock):
    store = ports.store
    window = rate_window("alice", RUN_NOWS_PER_MINUTE, 3, clock())
    for _ in range(3):
        store.count_request(window)
    with pytest.raises(QuotaExceeded) as refused:
        store.count_request(window)
    assert refused.value.field == RUN_NOWS_PER_MINUTE
    store.count_request(rate_window("bob", RUN_NOWS_PER_MINUTE, 3, clock()))
    # The window's record is forgotten (TTL) once it ends
    assert store.get_control(window.key)["expiresAt"] == window.ends_at_s


def test_a_request_that_counts_many_is_taken_whole_or_refused_whole(ports, clock):
    from duetime.domain.quotas import BACKFILL_SLOTS_PER_HOUR, HOUR_WINDOW_SECONDS

    store = ports.store

    def slots(n: int):
        return rate_window("alice", BACKFILL_SLOTS_PER_HOUR, 10, clock(), amount=n, seconds=HOUR_WINDOW_SECONDS)

    store.count_request(slots(6))
    with pytest.raises(QuotaExceeded) as refused:
        store.count_request(slots(5))  # 11 would pass the 10: refused, and nothing of it counted
    assert refused.value.field == BACKFILL_SLOTS_PER_HOUR and 0 < refused.value.retry_after <= HOUR_WINDOW_SECONDS
    store.count_request(slots(4))  # exactly the limit
    assert store.get_control(slots(1).key)["count"] == 10
    with pytest.raises(QuotaExceeded):
        store.count_request(slots(1))
