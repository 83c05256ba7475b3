"""Cron slots missed in an outage follow the job's catch-up policy even when some were dispatched before it:
a slot queued before the outage and received after it is skipped unless the policy runs it, and missed slots
dispatched in separate batches (one found by the reconciler, the next by the pre-loader's window) are each
recorded once."""

from __future__ import annotations

import pytest
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.dispatch import preload
from duetime.service.jobs import submit_job

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


@pytest.mark.parametrize(("policy", "runs"), [("latest", 1), ("none", 0), ("all", 3)])
def test_slots_missed_in_an_outage_are_each_counted_once(ports, clock, policy, runs):
    # Given an every-minute job whose 09:01 slot was queued (and its 09:02 follower created) just before
    # the system went down, so nobody ran it
    body = {"name": "c", "handler": "demo.echo", "catchUp": policy, "schedule": {"cron": "* * * * *"}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    clock.advance(40)
    preload(ports, "p")
    # When it comes back at 09:03:30 and pre-loads (09:02 from its window, 09:01 by the reconciler)
    clock.advance(170)
    preload(ports, "p")
    # Then the slots 09:01 .. 09:04 are covered once each: runs by the policy, the rest skipped once
    chain = sorted(ports.store.executions_of_job(job.job_id, limit=100), key=lambda e: e.scheduled_at)
    covered = sum((e.skipped_count or 1) if e.status == ExecutionStatus.SKIPPED else 1 for e in chain)
    minutes = int((chain[-1].scheduled_at - chain[0].scheduled_at).total_seconds() // 60) + 1
    assert covered == minutes, [(e.scheduled_at.time(), e.status.value, e.skipped_count) for e in chain]
    missed = [e for e in chain if e.scheduled_at < clock.now]
    assert sum(1 for e in missed if e.status == ExecutionStatus.SCHEDULED) == runs  # sent to run
    assert len({e.scheduled_at for e in chain}) == len(chain)


def received(ports, due_at):
    messages = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        messages += batch
    return next(r for r in messages if r.message.due_ms == int(due_at.timestamp() * 1000))


@pytest.mark.parametrize(
    ("policy", "cron", "down_seconds", "verdict", "reason"),
    [
        ("latest", "* * * * *", 170, cases.ClaimVerdict.DONE, "catch-up latest"),  # 09:02, 09:03 fell due too
        ("none", "* * * * *", 170, cases.ClaimVerdict.DONE, "catch-up none"),
        ("all", "* * * * *", 170, cases.ClaimVerdict.CLAIMED, None),
        ("latest", "*/10 * * * *", 560, cases.ClaimVerdict.CLAIMED, None),  # still the latest slot missed
    ],
)
def test_a_slot_queued_before_an_outage_and_received_after_it_follows_the_catch_up_policy(
    ports, clock, policy, cron, down_seconds, verdict, reason
):
    # Given a cron job whose first slot was queued just before the system went down
    body = {"name": "c", "handler": "demo.echo", "catchUp": policy, "schedule": {"cron": cron}}
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    clock.advance(job.next_run_at.timestamp() - clock.now.timestamp() - 20)
    preload(ports, "p")
    slot = job.next_run_at
    message = received(ports, slot).message
    # When a worker receives its message after the outage
    clock.advance(down_seconds)
    claim = cases.claim_execution(ports, message, "w1")
    # Then the slot runs only if the policy runs it; otherwise it is skipped, saying why
    assert claim.verdict == verdict
    if reason is not None:
        assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == reason
