"""Pure logic: full-jitter backoff, retry decisions, deterministic ids and the due partition."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from duetime.adapters.aws.queue import delay_seconds
from duetime.domain.errors import NotFound
from duetime.domain.keys import ExecutionKey, execution_id, parse_execution_id, shard_of
from duetime.domain.models import RetryPolicy, from_ms, to_ms
from duetime.domain.retry import backoff_cap_seconds, compute_backoff, should_retry
from hypothesis import given, settings
from hypothesis import strategies as st


def test_backoff_is_full_jitter_under_the_capped_exponential():
    policy = RetryPolicy(max_attempts=10, base_delay_seconds=30, max_delay_seconds=900)
    assert [backoff_cap_seconds(policy, a) for a in (1, 2, 3, 4, 5, 6)] == [60, 120, 240, 480, 900, 900]
    assert compute_backoff(policy, 3, lambda lo, hi: hi) == 240
    assert compute_backoff(policy, 3, lambda lo, hi: lo) == 0


@given(attempt=st.integers(1, 200), base=st.floats(0, 3600), cap=st.floats(0, 86400), r=st.floats(0, 1))
def test_backoff_always_lies_within_zero_and_the_cap(attempt, base, cap, r):
    policy = RetryPolicy(max_attempts=100, base_delay_seconds=base, max_delay_seconds=cap)
    delay = compute_backoff(policy, attempt, lambda lo, hi: lo + (hi - lo) * r)
    assert 0 <= delay <= cap


def test_retry_only_while_attempts_remain_and_the_failure_is_retryable():
    policy = RetryPolicy(max_attempts=3)
    assert should_retry(policy, 1, True) and should_retry(policy, 2, True)
    assert not should_retry(policy, 3, True)
    assert not should_retry(policy, 1, False)


def test_after_a_manual_retry_the_budget_counts_from_its_retry_base():
    policy = RetryPolicy(max_attempts=2)
    # failed for good at attempt 2, retried with retryBase 2: attempt 3 retries, attempt 4 is the last
    assert not should_retry(policy, 2, True)
    assert should_retry(policy, 3, True, retry_base=2)
    assert not should_retry(policy, 4, True, retry_base=2)
    assert not should_retry(policy, 3, False, retry_base=2)


def test_execution_ids_are_deterministic_per_slot_and_sort_by_time():
    slot = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    later = datetime(2026, 12, 1, 9, 1, tzinfo=UTC)
    assert execution_id("j_a", slot) == execution_id("j_a", slot)
    assert execution_id("j_a", slot) < execution_id("j_a", later)
    assert execution_id("j_a", slot, manual=True) != execution_id("j_a", slot)
    assert parse_execution_id(execution_id("j_a", slot)) == ("j_a", slot)
    assert parse_execution_id(execution_id("j_a", slot, manual=True)) == ("j_a", slot)


@pytest.mark.parametrize("bad", ["", "x", "j_a.12", "j_a.abcdefghijklm", "j_a.1795993284000.z", "a.b.c.d"])
def test_a_malformed_execution_id_is_not_found(bad):
    with pytest.raises(NotFound):
        parse_execution_id(bad)


def test_the_key_puts_an_execution_in_the_partition_of_its_due_hour():
    due = datetime(2026, 12, 1, 23, 59, 59, 500000, tzinfo=UTC)
    key = ExecutionKey.for_due("j_a", "j_a.x", due, shards=32)
    assert key.pk == f"2026120123#{shard_of('j_a', 32):03d}"
    assert key.sk == "1796169599500#j_a.x"


def test_shards_are_stable_and_spread():
    shards = [shard_of(f"j_{i:016x}", 32) for i in range(3200)]
    assert shard_of("j_0000000000000001", 32) == shard_of("j_0000000000000001", 32)
    assert min(shards.count(s) for s in range(32)) > 50


def test_messages_are_sent_a_second_early_in_whole_seconds_within_sqs_limits():
    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    ms = int(now.timestamp() * 1000)
    assert delay_seconds(ms + 10_500, now) == 9
    assert delay_seconds(ms + 500, now) == 0
    assert delay_seconds(ms - 5_000, now) == 0
    assert delay_seconds(ms + 3_600_000, now) == 900


@settings(max_examples=500, deadline=None)
@given(
    slot_ms=st.integers(min_value=0, max_value=10**13 - 1),
    job_hex=st.text(alphabet="0123456789abcdef", min_size=16, max_size=16),
    manual=st.booleans(),
)
def test_every_execution_id_in_the_allowed_range_parses_back_to_its_job_and_slot(slot_ms, job_hex, manual):
    job_id, slot = f"j_{job_hex}", from_ms(slot_ms)
    value = execution_id(job_id, slot, manual=manual)
    assert parse_execution_id(value) == (job_id, slot)
    assert to_ms(slot) == slot_ms
    key = ExecutionKey.for_due(job_id, value, slot, shards=32)
    assert key.sk.split("#", 1) == [f"{slot_ms:013d}", value]


@pytest.mark.parametrize("slot", [datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(2287, 1, 1, tzinfo=UTC)])
def test_a_slot_outside_the_range_ids_can_carry_is_refused(slot):
    with pytest.raises(ValueError, match="outside the range"):
        execution_id("j_a", slot)
