"""The gate between a due message and its claim (service/limits.py) on both adapters, with a hand clock: a
held-back run spends no attempt, a cap's slot is held with the lease (a dead worker's frees when its lease
ends) and a duplicate message of a running run does not free its slot."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import StaleAttempt
from duetime.domain.limits import HOLDER_ATTR_PREFIX, job_slots_key
from duetime.domain.models import JobSpec, format_time, to_ms
from duetime.service import limits
from duetime.service.executions import Lease, claim_execution
from duetime.service.jobs import run_now, submit_job
from duetime.service.outcomes import ClaimVerdict, RunResult
from duetime.service.ports import DueMessage
from duetime.worker.limited import with_slots
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS


def _job(ports, clock, **extra):
    body = {"name": "g", "handler": "demo.echo", "schedule": {"at": format_time(clock.now + timedelta(days=9))}}
    return submit_job(ports, "alice", JobSpec.model_validate({**body, **extra}))[0]


def _message(ports, execution) -> DueMessage:
    return DueMessage.for_execution(execution, ports.store.key_of(execution))


@BOTH_BACKENDS
def test_a_run_with_no_start_free_is_deferred_to_its_reserved_start_without_spending_an_attempt(ports, clock):
    limits.put_limit(ports, "alice", "slow", 1, 0, None)
    job = _job(ports, clock, rateLimit="slow")
    first, second = run_now(ports, "alice", job.job_id), None
    clock.advance(0.001)
    second = run_now(ports, "alice", job.job_id)
    assert claim_execution(ports, _message(ports, first), "w1").verdict == ClaimVerdict.CLAIMED
    held = claim_execution(ports, _message(ports, second), "w1")
    # Then the second is deferred to the next start a second later, its row untouched (no attempt spent)
    assert held.verdict == ClaimVerdict.LIMITED and held.deferred is not None
    assert held.deferred.limit_ready_ms == to_ms(clock.now) + 1000 == held.deferred.visible_ms
    assert ports.store.get_execution(ports.store.key_of(second)).attempt == 0
    # And at its start it is claimed on the reservation it carries, its wait recorded
    clock.advance(1)
    claimed = claim_execution(ports, held.deferred, "w1")
    assert claimed.verdict == ClaimVerdict.CLAIMED and claimed.execution.attempt == 1
    assert claimed.execution.waited_for_limit_ms == 1000


@BOTH_BACKENDS
def test_a_cap_slot_is_held_with_the_lease_and_a_duplicate_message_does_not_free_it(ports, clock):
    job = _job(ports, clock, maxConcurrent=1)
    first = run_now(ports, "alice", job.job_id)
    clock.advance(0.001)
    second = run_now(ports, "alice", job.job_id)
    running = claim_execution(ports, _message(ports, first), "w1")
    assert running.verdict == ClaimVerdict.CLAIMED and running.slots
    # A duplicate of the running run's message finds the cap full (it waits, to be dropped at its claim once
    # the run has ended) and leaves the running attempt's slot alone
    assert claim_execution(ports, _message(ports, first), "w2").verdict == ClaimVerdict.LIMITED
    waiting = claim_execution(ports, _message(ports, second), "w2")
    assert waiting.verdict == ClaimVerdict.LIMITED and waiting.deferred.not_before_ms == to_ms(clock.now) + 1000
    # When the running run's worker dies (no heartbeat), its slot frees as its lease ends: no leak
    clock.advance(ports.settings.job_class("default").lease_seconds + 1)
    taken = claim_execution(ports, waiting.deferred, "w2")
    assert taken.verdict == ClaimVerdict.CLAIMED and taken.execution.waited_for_limit_ms > 0
    assert ports.store.get_execution(ports.store.key_of(second)).attempt == 1


@BOTH_BACKENDS
def test_a_capped_run_gives_its_slot_back_when_it_ends_and_renews_it_with_its_lease(ports, clock, monkeypatch):
    job = _job(ports, clock, maxConcurrent=1)
    execution = run_now(ports, "alice", job.job_id)

    def holders() -> dict:
        record = ports.store.get_control(job_slots_key(job.job_id)) or {}
        return {k: v for k, v in record.items() if k.startswith(HOLDER_ATTR_PREFIX)}

    # A heartbeat of the claimed run extends its slot with its lease
    claim = claim_execution(ports, _message(ports, execution), "w1")
    key = ports.store.key_of(execution)
    lease = with_slots(Lease(ports, key, claim.execution, "default", "receipt"), claim.slots, claim.slot_holder)
    [(holder, until)] = holders().items()
    clock.advance(5)
    monkeypatch.setattr(ports.queues, "extend", lambda *args: None)  # a made-up receipt: the row and slot matter
    lease.extend()
    assert holders() == {holder: until + 5000}
    # And the run's end gives it back
    lease.complete(RunResult.success(None))
    assert holders() == {}
    monkeypatch.undo()
    # A worker running a capped run from its message leaves no slot held either
    second = run_now(ports, "alice", job.job_id)
    batch = ports.queues.receive("default", 10, 0, 30)
    [received] = [r for r in batch if r.message.execution_id == second.execution_id]
    assert Worker(ports, "default", "w1", concurrency=1).process(received) == "succeeded"
    assert holders() == {}


@BOTH_BACKENDS
def test_a_run_whose_slot_ended_with_its_lease_and_was_taken_is_fenced_out_at_its_next_heartbeat(
    ports, clock, monkeypatch
):
    """The simulation, seed 9814: a worker stalled past its lease, nobody took its run over, so the row lets its
    heartbeat extend the lease; but the run's slot ended with the lease and another run holds it now. The run is
    given up (its lease ended now, its message visible) rather than run one over the cap."""
    job = _job(ports, clock, maxConcurrent=1)
    first = run_now(ports, "alice", job.job_id)
    clock.advance(0.001)
    second = run_now(ports, "alice", job.job_id)
    claim = claim_execution(ports, _message(ports, first), "w1")
    key = ports.store.key_of(first)
    lease = with_slots(Lease(ports, key, claim.execution, "default", "receipt"), claim.slots, claim.slot_holder)
    monkeypatch.setattr(ports.queues, "extend", lambda *args: None)  # a made-up receipt: the row and slot matter
    # w1 stalls past its lease: its slot ends with it, and the second run takes the place
    clock.advance(ports.settings.job_class("default").lease_seconds + 1)
    assert claim_execution(ports, _message(ports, second), "w2").verdict == ClaimVerdict.CLAIMED
    # When w1 wakes, its heartbeat finds its slot gone: the run is given up, not run beside the other
    with pytest.raises(StaleAttempt):
        lease.extend()
    given_up = ports.store.get_execution(key)
    assert given_up.lease_until is not None and given_up.lease_until <= clock.now
