"""The checkpoint contract of the execution store, on every adapter: recorded in the heartbeat's fenced
write (attempt and claim token), kept across a takeover, a retry's move and a manual retry, and refused to
an attempt that no longer holds the row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import StaleAttempt
from duetime.domain.models import ExecutionStatus

from tests.contract.test_store_contract import waiting


def test_a_checkpoint_is_recorded_only_by_the_attempt_and_token_that_hold_the_row(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    assert claimed.checkpoint is None  # a row that never checkpointed has none
    token = claimed.claim_token
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    # When a write names a wrong token or another attempt, the conditional write refuses it
    with pytest.raises(StaleAttempt):
        store.record_checkpoint(key, 1, '{"n":1}', clock(), forged)
    with pytest.raises(StaleAttempt):
        store.record_checkpoint(key, 2, '{"n":1}', clock(), token)
    assert store.get_execution(key) == claimed
    # And the holder's checkpoint is recorded with its attempt and time, the lease left as it was
    recorded = store.record_checkpoint(key, 1, '{"n":1,"text":"é"}', clock.advance(3), token)
    assert recorded.checkpoint is not None
    assert (recorded.checkpoint.state, recorded.checkpoint.attempt) == ({"n": 1, "text": "é"}, 1)
    assert recorded.checkpoint.recorded_at == clock() and recorded.lease_until == claimed.lease_until
    assert store.get_execution(key) == recorded
    # With a lease end, the same write renews the lease (the heartbeat that carries it)
    later = clock() + timedelta(seconds=30)
    beat = store.record_checkpoint(key, 1, "null", clock.advance(1), token, lease_until=later)
    assert beat.lease_until == later and beat.checkpoint is not None and beat.checkpoint.state is None
    assert beat.checkpoint.recorded_at == clock()


def test_the_next_attempt_finds_the_last_checkpoint_and_the_old_one_can_no_longer_write(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    first = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    store.record_checkpoint(key, 1, '{"count":4}', clock.advance(5), first.claim_token)
    # When attempt 1's lease ends and w2 takes over, the claim hands w2 the checkpoint
    second = store.claim(key, "w2", clock.advance(30), clock() + timedelta(seconds=30)).claimed
    assert second.attempt == 2 and second.checkpoint is not None
    assert (second.checkpoint.state, second.checkpoint.attempt) == ({"count": 4}, 1)
    # Then attempt 1's late checkpoint is refused and changes nothing
    with pytest.raises(StaleAttempt):
        store.record_checkpoint(key, 1, '{"count":9}', clock(), first.claim_token)
    assert store.get_execution(key).checkpoint == second.checkpoint
    # And attempt 2's replaces it
    again = store.record_checkpoint(key, 2, '{"count":5}', clock.advance(1), second.claim_token)
    assert (again.checkpoint.state, again.checkpoint.attempt) == ({"count": 5}, 2)


def test_a_checkpoint_moves_with_a_retry_and_stays_on_a_row_that_failed_for_good(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    current = store.record_checkpoint(key, 1, '{"count":2}', clock(), claimed.claim_token)
    # A retry moves the row as the worker holds it (checkpoint included) to its new due partition
    moved = current.model_copy(
        update={"due_at": clock() + timedelta(hours=2), "status": ExecutionStatus.SCHEDULED, "lease_until": None}
    )
    store.move_for_retry(key, 1, moved, claimed.claim_token)
    new_key = store.key_of(moved)
    retried = store.claim(new_key, "w2", clock(), clock() + timedelta(seconds=30)).claimed
    assert retried.attempt == 2 and retried.checkpoint == current.checkpoint
    # A row that failed for good keeps it (a manual retry resumes from it)
    failed = store.finish(new_key, 2, ExecutionStatus.FAILED, clock(), error="boom", claim_token=retried.claim_token)
    assert failed.checkpoint == current.checkpoint
    manual = failed.model_copy(
        update={"status": ExecutionStatus.SCHEDULED, "due_at": clock() + timedelta(hours=3), "retry_base": 2}
    )
    assert store.retry_failed(new_key, 2, manual)
    assert store.get_execution(store.key_of(manual)).checkpoint == current.checkpoint
