"""The execution lifecycle through the service, against moto: create, pre-load, claim, heartbeat,
complete, retry, dead-letter, and fencing by attempt."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from duetime.domain.errors import StaleAttempt
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.dispatch import preload
from duetime.service.jobs import get_job, submit_job

from tests.conftest import BOTH_BACKENDS

# The use-cases behave the same on every adapter.
pytestmark = BOTH_BACKENDS


def spec(**overrides):
    body = {"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:10:00Z"}}
    body.update(overrides)
    return JobSpec.model_validate(body)


def receive_all(ports, job_class="default"):
    return ports.queues.receive(job_class, 10, 0, 30)


def test_an_execution_due_beyond_the_window_waits_for_the_preloader_then_is_sent(ports, clock):
    # Given a job due in 10 minutes (beyond the 30 s window)
    job, created = submit_job(ports, "alice", spec())
    assert created and receive_all(ports) == []
    # When the clock nears its time and the pre-loader runs
    clock.advance(600 - 20)
    report = preload(ports, "p1")
    # Then exactly that execution is sent, once
    assert report.sent == 1
    [received] = receive_all(ports)
    assert received.message.job_id == job.job_id
    # And a second pre-load cycle does not send it again (the cursor moved past it)
    assert preload(ports, "p1").sent == 0


def test_an_execution_due_within_the_window_is_sent_at_create(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:10Z"}))
    assert len(receive_all(ports)) == 1


def claimed(ports, clock, worker="w1"):
    [received] = receive_all(ports)
    claim = cases.claim_execution(ports, received.message, worker)
    return received, claim


def test_claim_is_exclusive_and_a_stale_attempt_is_fenced_out(ports, clock):
    # Given a due execution claimed by w1
    job, _ = submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}))
    clock.advance(5)
    received, first = claimed(ports, clock)
    assert first.verdict == cases.ClaimVerdict.CLAIMED and first.execution.attempt == 1
    key = received.message.key
    # When another worker tries while the lease is live, its message is a duplicate: it is dropped
    second = cases.claim_execution(ports, received.message, "w2")
    assert second.verdict == cases.ClaimVerdict.DONE and second.execution.worker_id != "w2"
    # When w1 is paused past its lease, w2 claims attempt 2
    clock.advance(31)
    third = cases.claim_execution(ports, received.message, "w2")
    assert third.verdict == cases.ClaimVerdict.CLAIMED and third.execution.attempt == 2
    # Then w1's heartbeat and completion with attempt 1 are refused and change nothing
    with pytest.raises(StaleAttempt):
        cases.heartbeat(ports, key, 1)
    with pytest.raises(StaleAttempt):
        cases.complete(ports, key, 1, succeeded=True, result="stale")
    row = ports.store.get_execution(key)
    assert row.status == ExecutionStatus.RUNNING and row.attempt == 2 and row.worker_id == "w2"
    # And attempt 2's completion is recorded
    done = cases.complete(ports, key, 2, succeeded=True, result={"ok": True})
    assert done.status == ExecutionStatus.SUCCEEDED and done.result == {"ok": True}
    assert [a.worker_id for a in done.attempts] == ["w1", "w2"]


def test_heartbeat_extends_the_lease(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}))
    clock.advance(5)
    received, claim = claimed(ports, clock)
    clock.advance(10)
    beat = cases.heartbeat(ports, received.message.key, 1)
    assert beat.lease_until == clock.now + timedelta(seconds=30)


def test_a_retryable_failure_moves_the_row_to_its_new_due_hour_in_one_transaction(ports, clock):
    # Given a job due at 09:59:50 whose first attempt fails with 100 s backoff (uniform -> the cap)
    clock.now = clock.now.replace(minute=59, second=40)
    submit_job(
        ports,
        "alice",
        spec(
            schedule={"at": "2026-12-01T09:59:50Z"},
            retry={"maxAttempts": 3, "baseDelaySeconds": 50, "maxDelaySeconds": 100},
        ),
    )
    clock.advance(10)
    received, claim = claimed(ports, clock)
    old_key = received.message.key
    moved = cases.complete(ports, old_key, 1, succeeded=False, error="boom")
    # Then the row lives in the partition of 10:01:30, the old key is gone, the slot is unchanged
    assert moved.status == ExecutionStatus.SCHEDULED and moved.due_at == clock.now + timedelta(seconds=100)
    new_key = ports.store.key_of(moved)
    assert new_key.pk.startswith("2026120110#") and old_key.pk.startswith("2026120109#")
    assert ports.store.get_execution(old_key) is None
    again = ports.store.get_execution(new_key)
    assert again.scheduled_at == claim.execution.scheduled_at and again.error == "boom"
    assert again.attempts[0].outcome == "failed"
    # And a stale retry of the same attempt cannot move it twice
    with pytest.raises(StaleAttempt):
        cases.complete(ports, old_key, 1, succeeded=False, error="again")


def test_exhausted_attempts_end_failed_and_go_to_the_dlq(ports, clock):
    job, _ = submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}, retry={"maxAttempts": 1}))
    clock.advance(5)
    received, _ = claimed(ports, clock)
    failed = cases.complete(ports, received.message.key, 1, succeeded=False, error="nope")
    assert failed.status == ExecutionStatus.FAILED and failed.error == "nope"
    [(body, _)] = ports.queues.receive_dead_letters("default")
    assert body["executionId"] == failed.execution_id and body["owner"] == "alice"


def test_a_permanent_failure_is_not_retried(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}, retry={"maxAttempts": 5}))
    clock.advance(5)
    received, _ = claimed(ports, clock)
    failed = cases.complete(ports, received.message.key, 1, succeeded=False, error="bad", retryable=False)
    assert failed.status == ExecutionStatus.FAILED and failed.attempt == 1


def test_a_message_for_a_finished_execution_is_dropped(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}))
    clock.advance(5)
    received, _ = claimed(ports, clock)
    cases.complete(ports, received.message.key, 1, succeeded=True)
    assert cases.claim_execution(ports, received.message, "w9").verdict == cases.ClaimVerdict.DONE


def test_a_cron_job_creates_its_next_execution_at_dispatch_from_the_scheduled_time(ports, clock):
    # Given an every-minute cron job
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "* * * * *", "timeZone": "UTC"}))
    assert get_job(ports, "alice", job.job_id).job.next_run_at == clock.now + timedelta(minutes=1)
    # When the pre-loader runs shortly before each slot, three times
    slots = []
    for _ in range(3):
        clock.advance(60)
        preload(ports, "p1")
        slots += [r.message.execution_id for r in receive_all(ports)]
    # Then each minute's slot was sent exactly once, and they are consecutive minutes
    minutes = sorted({s.split(".")[1] for s in slots})
    assert len(minutes) == len(set(slots)) >= 3
    deltas = {int(b) - int(a) for a, b in itertools.pairwise(minutes)}
    assert deltas == {60_000}


def test_a_shard_is_leased_to_one_preloader_while_its_cycle_runs_and_handed_back_at_its_end(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:10:00Z"}))
    clock.advance(590)
    now_ms = int(clock.now.timestamp() * 1000)
    # While p1 works on shard 0 (it holds the lease), p2's cycle leaves that shard alone
    assert ports.store.acquire_lease("preload#000", "p1", now_ms, now_ms + 5_000)["leaseOwner"] == "p1"
    report = preload(ports, "p2")
    assert report.busy == 1 and report.shards == ports.settings.shards - 1
    assert ports.store.get_control("preload#000")["leaseOwner"] == "p1"
    # p2 handed back every lease it took at the end of its cycle
    assert "leaseOwner" not in ports.store.get_control("preload#001")
    # Once p1's cycle ends (the cursor moves and the lease goes back), the next cycle takes shard 0 at once
    assert ports.store.advance_cursor("preload#000", "p1", now_ms)
    assert preload(ports, "p3").shards == ports.settings.shards


def test_an_unknown_message_key_is_dropped(ports):
    from duetime.adapters.aws.queue import DueMessage

    message = DueMessage(ExecutionKey("2026120109#000", "x"), "j_x.0000000000000", "j_missing", 0, "default")
    assert cases.claim_execution(ports, message, "w1").verdict == cases.ClaimVerdict.DONE


def test_when_every_attempt_loses_its_worker_the_execution_fails_for_good_and_the_owner_is_told(ports, clock):
    # Given a job with two attempts whose workers both die (their leases end unrenewed)
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}, retry={"maxAttempts": 2}))
    clock.advance(5)
    [received] = receive_all(ports)
    for worker in ("w1", "w2"):
        claim = cases.claim_execution(ports, received.message, worker)
        assert claim.verdict == cases.ClaimVerdict.CLAIMED
        clock.advance(31)
    # When the message comes back once more
    claim = cases.claim_execution(ports, received.message, "w3")
    # Then no third attempt starts: the execution ends failed with the reason, and the DLQ has its notice
    assert claim.verdict == cases.ClaimVerdict.DONE
    row = ports.store.get_execution(received.message.key)
    assert row.status == ExecutionStatus.FAILED and row.attempt == 2
    assert "stopped heartbeating" in row.error
    [(notice, _)] = ports.queues.receive_dead_letters("default")
    assert notice["executionId"] == row.execution_id and notice["owner"] == "alice"


def test_a_first_attempt_later_than_the_starting_deadline_is_skipped_with_its_reason(ports, clock):
    submit_job(ports, "alice", spec(schedule={"at": "2026-12-01T09:00:05Z"}, startingDeadlineSeconds=10))
    [received] = receive_all(ports)
    clock.advance(5 + 11)  # an outage: the message is taken 11 s after its slot
    claim = cases.claim_execution(ports, received.message, "w1")
    assert claim.verdict == cases.ClaimVerdict.DONE
    assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == "starting deadline"


def test_a_retry_is_not_skipped_by_the_starting_deadline(ports, clock):
    submit_job(
        ports,
        "alice",
        spec(
            schedule={"at": "2026-12-01T09:00:05Z"},
            startingDeadlineSeconds=10,
            retry={"maxAttempts": 2, "baseDelaySeconds": 20, "maxDelaySeconds": 20},
        ),
    )
    clock.advance(5)
    [received] = receive_all(ports)
    cases.claim_execution(ports, received.message, "w1")
    moved = cases.complete(ports, received.message.key, 1, succeeded=False, error="boom")
    clock.advance(40)  # the retry runs 45 s after the slot, well past the deadline
    from duetime.adapters.aws.queue import DueMessage

    message = DueMessage.for_execution(moved, ports.store.key_of(moved))
    assert cases.claim_execution(ports, message, "w2").verdict == cases.ClaimVerdict.CLAIMED
