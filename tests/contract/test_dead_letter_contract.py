"""The store contract of dead letters (mark_notified with an owner, list_dead_letters) and of retry_failed,
on every adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import InvalidInput
from duetime.domain.models import ExecutionStatus
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job, swept


def failed_execution(ports, clock, job_id="j_0000000000000001", owner="alice"):
    """A row of `owner`'s job that failed for good at attempt 1 (not yet told)."""
    store = ports.store
    job = make_job(clock, job_id=job_id, owner=owner)
    execution = new_execution(job, clock())
    store.put_execution(execution)
    key = store.key_of(execution)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    return key, store.finish(key, 1, ExecutionStatus.FAILED, clock(), error="boom")


def test_a_failure_told_with_its_owner_is_listed_in_that_owners_dead_letters_only(ports, clock):
    store = ports.store
    key, failed = failed_execution(ports, clock)
    assert store.list_dead_letters("alice", 10, None).items == []  # not told yet
    store.mark_notified(key, clock(), "alice")
    listed = store.list_dead_letters("alice", 10, None)
    assert [e.execution_id for e in listed.items] == [failed.execution_id] and listed.cursor is None
    # The row stays, with its error: a failure is still inspectable after its notice
    assert (listed.items[0].status, listed.items[0].error) == (ExecutionStatus.FAILED, "boom")
    assert store.get_execution(key).error == "boom"
    assert store.list_dead_letters("bob", 10, None).items == []


def test_dead_letters_are_listed_newest_first_in_pages_bound_to_the_owner(ports, clock):
    store = ports.store
    ids = []
    for i in range(5):
        clock.advance(60)
        key, failed = failed_execution(ports, clock, job_id=f"j_{i + 1:016x}")
        store.mark_notified(key, clock(), "alice")
        ids.append(failed.execution_id)
        other, _ = failed_execution(ports, clock, job_id=f"j_{i + 100:016x}", owner="bob")
        store.mark_notified(other, clock(), "bob")
    seen, cursor = [], None
    while True:
        page = store.list_dead_letters("alice", 2, cursor)
        assert len(page.items) <= 2
        seen += [e.execution_id for e in page.items]
        cursor = page.cursor
        if cursor is None:
            break
        with pytest.raises(InvalidInput) as refused:
            store.list_dead_letters("bob", 2, cursor)
        assert refused.value.field == "cursor"
    assert seen == ids[::-1]


def test_retry_failed_moves_the_row_back_to_waiting_and_out_of_the_dead_letters(ports, clock):
    store = ports.store
    key, failed = failed_execution(ports, clock)
    store.mark_notified(key, clock(), "alice")
    clock.advance(3600)  # due an hour later: another partition
    retried = failed.model_copy(
        update={"status": ExecutionStatus.SCHEDULED, "due_at": clock(), "finished_at": None, "retry_base": 1}
    )
    assert store.retry_failed(key, 1, retried) is True
    new_key = store.key_of(retried)
    assert new_key != key and store.get_execution(key) is None
    row = store.get_execution(new_key)
    assert (row.status, row.attempt, row.retry_base, row.execution_id) == (
        ExecutionStatus.SCHEDULED,
        1,
        1,
        failed.execution_id,
    )
    assert store.list_dead_letters("alice", 10, None).items == []
    shard = int(new_key.pk.rsplit("#", 1)[1])
    swept(ports, shard, clock())  # once its new due time is overdue, the sweep finds it still waiting
    assert [e.execution_id for e in store.open_executions(shard, 2**42)] == [failed.execution_id]
    # Claimed again, the attempt number goes on from where it stopped
    claimed = store.claim(new_key, "w2", clock(), clock() + timedelta(seconds=30), max_attempts=1 + 1).claimed
    assert claimed is not None and claimed.attempt == 2 and claimed.retry_base == 1
    # A second retry of the same failure finds no failed row and writes nothing
    assert store.retry_failed(key, 1, retried.model_copy(update={"due_at": clock() + timedelta(hours=2)})) is False


def test_retry_failed_refuses_a_row_that_is_not_failed_at_that_attempt(ports, clock):
    store = ports.store
    key, failed = failed_execution(ports, clock)
    clock.advance(60)
    retried = failed.model_copy(update={"status": ExecutionStatus.SCHEDULED, "due_at": clock(), "retry_base": 1})
    assert store.retry_failed(key, 2, retried) is False
    assert store.get_execution(key).status == ExecutionStatus.FAILED
    assert store.get_execution(store.key_of(retried)) is None


def test_marking_a_row_that_is_gone_does_nothing(ports, clock):
    key, failed = failed_execution(ports, clock)
    clock.advance(60)
    retried = failed.model_copy(update={"status": ExecutionStatus.SCHEDULED, "due_at": clock(), "retry_base": 1})
    assert ports.store.retry_failed(key, 1, retried)
    ports.store.mark_notified(key, clock(), "alice")  # its notice drained after the retry: nothing to record
    assert ports.store.get_execution(key) is None
    assert ports.store.list_dead_letters("alice", 10, None).items == []
