"""After an outage, a cron chain whose missed slots are dispatched in separate batches (one already queued
before the outage, found by the reconciler; the next found by the pre-loader's window) records each missed
slot once: the policy's runs happen once and the skip records cover every other slot exactly once."""

from __future__ import annotations

import pytest
from duetime.domain.models import ExecutionStatus, JobSpec
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
