"""The store ports' contract for rate limits and concurrency caps (issue 20), run on every adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import StaleAttempt
from duetime.domain.limits import RateLimit, bucket_key, job_slots_key

from tests.contract.test_store_contract import waiting

# Epoch ms in 2027: records carry a TTL, and a record whose TTL is past is read as gone.
T0 = 1_800_000_000_000


def test_limits_are_created_replaced_listed_and_deleted_per_owner(ports):
    store = ports.store
    partner = RateLimit(name="partner-api", per_second=50, burst=10, max_concurrent=20, updated_ms=1)
    slow = RateLimit(name="slow", per_second=0.5, burst=0, max_concurrent=None, updated_ms=2)
    assert store.get_limits("alice") == {}
    assert store.put_limit("alice", partner) is True
    assert store.put_limit("alice", slow) is True
    assert store.get_limits("alice") == {"partner-api": partner, "slow": slow}
    assert store.get_limits("bob") == {}  # another owner's are not his
    replaced = RateLimit(name="partner-api", per_second=2.5, burst=0, max_concurrent=None, updated_ms=3)
    assert store.put_limit("alice", replaced) is False
    assert store.get_limits("alice")["partner-api"] == replaced
    assert store.delete_limit("alice", "partner-api") is True
    assert store.delete_limit("alice", "partner-api") is False
    assert store.delete_limit("bob", "slow") is False
    assert store.get_limits("alice") == {"slow": slow}


def test_an_idle_bucket_gives_burst_plus_one_starts_at_once_then_one_each_interval(ports):
    store = ports.store
    key = bucket_key("alice", "partner-api")
    # 50/s (a start every 20 ms) with a burst of 2: twelve callers at the same instant
    starts = [store.reserve_start(key, T0, 20.0, 2) for _ in range(12)]
    assert starts[:3] == [T0] * 3
    assert starts[3:] == [T0 + 20 * i for i in range(1, 10)]
    # Another limit's bucket is its own
    assert store.reserve_start(bucket_key("alice", "other"), T0, 20.0, 0) == T0
    # After a quiet spell the bucket is full again
    assert store.reserve_start(key, T0 + 1_000_000, 20.0, 2) == T0 + 1_000_000


def test_starts_reserved_in_any_second_stay_within_rate_plus_burst(ports):
    store = ports.store
    key = bucket_key("alice", "paced")
    now = T0
    starts = []
    for i in range(150):  # callers arrive faster than the limit, now and then the clock moves on
        if i % 30 == 29:
            now += 250
        starts.append(store.reserve_start(key, now, 20.0, 5))
    # Every caller got a start, in arrival order, spaced at the rate once the burst is spent
    assert starts == sorted(starts) and starts[-1] == T0 + (150 - 6) * 20
    for first in starts:
        assert sum(1 for s in starts if first <= s < first + 1000) <= 50 + 5


def test_a_cap_holds_at_most_capacity_slots_and_a_released_or_ended_hold_frees_one(ports):
    store = ports.store
    key = job_slots_key("j_0000000000000001")
    assert store.acquire_slot(key, "e1", 2, now_ms=T0 + 1000, until_ms=T0 + 31_000) is True
    assert store.acquire_slot(key, "e2", 2, now_ms=T0 + 1000, until_ms=T0 + 31_000) is True
    assert store.acquire_slot(key, "e3", 2, now_ms=T0 + 1000, until_ms=T0 + 31_000) is False
    # A holder taking its slot again (a redelivered message) renews it, it does not need a second
    assert store.acquire_slot(key, "e1", 2, now_ms=T0 + 2000, until_ms=T0 + 32_000) is True
    store.release_slot(key, "e1")
    assert store.acquire_slot(key, "e3", 2, now_ms=T0 + 3000, until_ms=T0 + 33_000) is True
    assert store.acquire_slot(key, "e4", 2, now_ms=T0 + 3000, until_ms=T0 + 33_000) is False
    # A dead worker's hold ends with its lease: renewed holds stay, the ended one frees its slot (no leak)
    store.renew_slot(key, "e3", T0 + 60_000)
    assert store.acquire_slot(key, "e4", 2, now_ms=T0 + 31_000, until_ms=T0 + 61_000) is True  # e2's hold ended at 31 s
    assert store.acquire_slot(key, "e5", 2, now_ms=T0 + 31_000, until_ms=T0 + 61_000) is False  # e3 renewed, e4 holds
    # Renewing a hold that was given back does not take a slot again
    store.release_slot(key, "e4")
    store.renew_slot(key, "e4", T0 + 90_000)
    assert store.acquire_slot(key, "e5", 2, now_ms=T0 + 32_000, until_ms=T0 + 62_000) is True


def test_the_wait_for_a_limit_is_recorded_on_the_claimed_row_fenced_by_its_attempt(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    assert claimed is not None and claimed.waited_for_limit_ms is None
    recorded = store.record_limit_wait(key, 1, 1500, claimed.claim_token)
    assert recorded.waited_for_limit_ms == 1500 and recorded.attempt == 1
    assert store.get_execution(key).waited_for_limit_ms == 1500
    with pytest.raises(StaleAttempt):
        store.record_limit_wait(key, 1, 10, "not-the-token")
    with pytest.raises(StaleAttempt):
        store.record_limit_wait(key, 2, 10, claimed.claim_token)
    assert store.get_execution(key).waited_for_limit_ms == 1500
