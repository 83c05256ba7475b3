"""The store ports added for issue 34, on every adapter: the at-most-once claim (`first_only`) takes only a
row no attempt claimed, an attempt's outcome may be recorded as `unknown`, a row is marked late once, and
lateness counters add up."""

from __future__ import annotations

from datetime import timedelta

from duetime.domain.models import RESULT_UNKNOWN, Delivery, ExecutionStatus
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job


def created(ports, clock, **spec):
    job = make_job(clock, **spec)
    first = new_execution(job, clock())
    ports.store.create_job(job, first)
    return ports.store.key_of(first)


def test_a_first_only_claim_takes_a_fresh_row_once_and_never_a_lost_one(ports, clock):
    store = ports.store
    key = created(ports, clock, delivery=Delivery.AT_MOST_ONCE)
    lease = clock() + timedelta(seconds=30)
    first = store.claim(key, "w1", clock(), lease, max_attempts=1, first_only=True)
    assert first.claimed is not None and first.claimed.attempt == 1
    # Its lease ended (the worker lost): an at-least-once claim with attempts left would take it over
    later = clock() + timedelta(seconds=31)
    again = store.claim(key, "w2", later, later + timedelta(seconds=30), max_attempts=5, first_only=True)
    assert again.claimed is None and again.current.status == ExecutionStatus.RUNNING and again.current.attempt == 1
    # And its attempt may end with the outcome unknown
    ended = store.finish(key, 1, ExecutionStatus.FAILED, later, error="result unknown", outcome=RESULT_UNKNOWN)
    assert ended.status == ExecutionStatus.FAILED and [a.outcome for a in ended.attempts] == [RESULT_UNKNOWN]
    assert store.get_execution(key).attempts[0].outcome == RESULT_UNKNOWN


def test_a_row_is_marked_late_once_and_keeps_its_claim_fencing(ports, clock):
    store = ports.store
    key = created(ports, clock)
    assert store.get_execution(key).late_at is None
    marked = store.mark_late(key, clock())
    assert marked is not None and marked.late_at == clock()
    assert store.mark_late(key, clock() + timedelta(seconds=5)) is None
    assert store.get_execution(key).late_at == clock()
    # A claim and a finish after the mark keep it
    claim = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    assert claim.claimed is not None and claim.claimed.late_at == clock()
    done = store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock(), result={"ok": True})
    assert done.late_at == clock()


def test_counters_add_up_and_read_back_in_one_batch(ports, clock):
    store = ports.store
    expires = int((clock() + timedelta(days=32)).timestamp())
    for _ in range(3):
        store.add_count("lateness#j_1#20261201#onTime", 1, expires)
    store.add_count("lateness#j_1#20261201#late", 1, expires)
    found = store.get_controls(["lateness#j_1#20261201#onTime", "lateness#j_1#20261201#late", "lateness#none"])
    assert found["lateness#j_1#20261201#onTime"]["count"] == 3 and found["lateness#j_1#20261201#late"]["count"] == 1
    assert "lateness#none" not in found
