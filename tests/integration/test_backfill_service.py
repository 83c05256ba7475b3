"""Backfill through the service on both backends: every past slot once, kind `backfill`, never twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from duetime.definitions import MAX_BACKFILL_SLOTS
from duetime.domain.errors import Conflict, InvalidInput
from duetime.domain.keys import execution_id
from duetime.domain.models import ExecutionStatus, JobSpec, Overlap
from duetime.service import backfill as backfill_module
from duetime.service import executions as cases
from duetime.service.backfill import backfill
from duetime.service.jobs import pause_job, submit_job
from duetime.service.ports import DueMessage

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

DAY = datetime(2026, 12, 2, tzinfo=UTC)


def hourly_job(ports, **overrides):
    body = {"name": "h", "handler": "demo.echo", "schedule": {"cron": "0 * * * *", "timeZone": "UTC"}}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def drain(ports):
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += batch
    return out


def test_a_day_of_an_hourly_job_creates_24_runs_once_and_they_run_as_backfill(ports, clock):
    # Given an hourly job and a clock three days on (the pre-loader never ran: those slots have no rows)
    job = hourly_job(ports)
    clock.advance(3 * 86400)
    # When one day is backfilled, twice
    first = backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(days=1))
    second = backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(days=1))
    # Then the first creates the 24 runs and the second finds them all there
    assert (first.created, first.present, first.skipped) == (24, 0, 0)
    assert first.first_slot == DAY and first.last_slot == DAY + timedelta(hours=23)
    assert (second.created, second.present) == (0, 24)
    # And the 24 run (one message each, all due now), recorded in the history with kind backfill
    received = drain(ports)
    assert len(received) == 24 and {r.message.kind for r in received} == {"backfill"}
    for r in received:
        claim = cases.claim_execution(ports, r.message, "w1")
        assert claim.verdict == cases.ClaimVerdict.CLAIMED
        cases.complete(ports, r.message.key, 1, succeeded=True)
    runs = [e for e in ports.store.executions_of_job(job.job_id, limit=100) if e.kind == "backfill"]
    assert len(runs) == 24 and {e.status for e in runs} == {ExecutionStatus.SUCCEEDED}
    assert {e.overlap for e in runs} == {Overlap.FORBID}  # stored on the row: a resent message keeps it
    assert sorted(e.scheduled_at for e in runs) == [DAY + timedelta(hours=h) for h in range(24)]


def test_slots_that_already_have_an_execution_are_left_alone(ports, clock):
    # Given an hourly job created at 09:00 whose first live slot (10:00) is waiting
    job = hourly_job(ports)
    clock.advance(86400)
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    # When 09:00 up to 13:00 is backfilled
    result = backfill(ports, "alice", job.job_id, start, start + timedelta(hours=4))
    # Then 10:00 is present and left waiting as it was; 09:00 (before the job's first live slot), 11:00 and
    # 12:00 are new
    assert result.first_slot == start and (result.created, result.present) == (3, 1)
    waiting = ports.store.find_execution(job.job_id, execution_id(job.job_id, start + timedelta(hours=1)))
    assert waiting is not None and waiting.kind == "scheduled"


def test_excluded_dates_are_recorded_skipped_and_bounds_respected(ports, clock):
    # Given an hourly job excluding 2 Dec and ending at 3 Dec 05:00
    job = hourly_job(
        ports,
        exclude=["2026-12-02"],
        schedule={"cron": "0 * * * *", "timeZone": "UTC", "endAt": "2026-12-03T05:00:00Z"},
    )
    clock.advance(5 * 86400)
    # When 2 Dec 00:00 up to 4 Dec 00:00 is backfilled
    result = backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(days=2))
    # Then 2 Dec's 24 slots are skip records and 3 Dec runs 00:00..05:00 (endAt is the last slot)
    assert (result.created, result.skipped, result.present) == (6, 24, 0)
    assert result.last_slot == DAY + timedelta(days=1, hours=5)
    skipped = [e for e in ports.store.executions_of_job(job.job_id, limit=100) if e.status == ExecutionStatus.SKIPPED]
    assert len(skipped) == 24 and {e.skip_reason for e in skipped} == {"excluded"}
    assert len(drain(ports)) == 6


def test_forbid_runs_backfilled_slots_one_at_a_time_and_allow_together(ports, clock):
    serial = hourly_job(ports)
    together = hourly_job(ports, name="t")
    clock.advance(86400)
    backfill(ports, "alice", serial.job_id, DAY - timedelta(hours=2), DAY, Overlap.FORBID)
    backfill(ports, "alice", together.job_id, DAY - timedelta(hours=2), DAY, Overlap.ALLOW)
    received = drain(ports)
    serial_runs = sorted((r for r in received if r.message.job_id == serial.job_id), key=lambda r: r.message.due_ms)
    together_runs = [r for r in received if r.message.job_id == together.job_id]
    # forbid: oldest first (the second waits for the first even before it starts), and the second waits
    # while the first runs, then runs once it has ended
    assert cases.claim_execution(ports, serial_runs[1].message, "w2").verdict == cases.ClaimVerdict.BUSY
    assert cases.claim_execution(ports, serial_runs[0].message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    assert cases.claim_execution(ports, serial_runs[1].message, "w2").verdict == cases.ClaimVerdict.BUSY
    cases.complete(ports, serial_runs[0].message.key, 1, succeeded=True)
    assert cases.claim_execution(ports, serial_runs[1].message, "w2").verdict == cases.ClaimVerdict.CLAIMED
    # allow: both run at once
    assert [cases.claim_execution(ports, r.message, "w").verdict for r in together_runs] == [
        cases.ClaimVerdict.CLAIMED
    ] * 2


def test_a_backfill_run_long_past_is_not_skipped_by_the_starting_deadline(ports, clock):
    job = hourly_job(ports, startingDeadlineSeconds=60)
    clock.advance(2 * 86400)
    backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(hours=1))
    (received,) = drain(ports)
    assert cases.claim_execution(ports, received.message, "w").verdict == cases.ClaimVerdict.CLAIMED


@pytest.mark.parametrize(
    ("start", "end", "overlap", "field"),
    [
        (DAY, DAY, Overlap.FORBID, "to"),
        (DAY + timedelta(hours=1), DAY, Overlap.FORBID, "to"),
        (DAY, DAY + timedelta(days=30), Overlap.FORBID, "to"),  # the future
        (DAY - timedelta(days=1), DAY, Overlap.REPLACE, "overlap"),
    ],
)
def test_bad_ranges_and_policies_are_refused_naming_the_field(ports, clock, start, end, overlap, field):
    job = hourly_job(ports)
    clock.advance(3 * 86400)
    with pytest.raises(InvalidInput) as refused:
        backfill(ports, "alice", job.job_id, start, end, overlap)
    assert refused.value.field == field
    assert drain(ports) == []


def test_more_slots_than_one_request_may_cover_is_refused_and_nothing_is_written(ports, clock, monkeypatch):
    # The limit as deployed on SQLite; on moto (a put a slot, a few hundred calls a second here) a tenth of it:
    # 1,000 conditional puts cost that tier 15 s of CPU to show what 100 show.
    most = MAX_BACKFILL_SLOTS
    if type(ports.store).__module__.startswith("duetime.adapters.aws"):
        most = MAX_BACKFILL_SLOTS // 10
        monkeypatch.setattr(backfill_module, "MAX_BACKFILL_SLOTS", most)
    job = hourly_job(ports, schedule={"cron": "* * * * *", "timeZone": "UTC"})
    clock.advance(3 * 86400)
    too_far = DAY + timedelta(minutes=most + 1)
    with pytest.raises(InvalidInput) as refused:
        backfill(ports, "alice", job.job_id, DAY, too_far)
    assert refused.value.field == "to"
    assert not [e for e in ports.store.executions_of_job(job.job_id, limit=10) if e.kind == "backfill"]
    assert backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(minutes=most)).created == most


def test_only_an_active_recurring_job_of_the_owner_is_backfilled(ports, clock):
    job = hourly_job(ports)
    one_off, _ = submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "o", "handler": "demo.echo", "schedule": {"at": "2026-12-01T10:00:00Z"}}),
    )
    clock.advance(3 * 86400)
    with pytest.raises(Conflict):
        backfill(ports, "alice", one_off.job_id, DAY, DAY + timedelta(hours=1))
    pause_job(ports, "alice", job.job_id)
    with pytest.raises(Conflict):
        backfill(ports, "alice", job.job_id, DAY, DAY + timedelta(hours=1))


def test_a_slot_whose_run_was_retried_elsewhere_is_present_not_run_again(ports, clock):
    # Given the 10:00 live run failed once and was moved to its retry's partition (due later)
    job = hourly_job(ports, retry={"maxAttempts": 3, "baseDelaySeconds": 3600, "maxDelaySeconds": 3600})
    live = ports.store.open_executions_of_job(job.job_id)[0]
    clock.advance(3600)
    key = ports.store.key_of(live)
    assert cases.claim_execution(ports, DueMessage.for_execution(live, key), "w1").verdict == cases.ClaimVerdict.CLAIMED
    retried = cases.complete(ports, key, 1, succeeded=False, error="boom")
    assert retried.status == ExecutionStatus.SCHEDULED and ports.store.key_of(retried) != key
    # When the hour of that slot is backfilled
    clock.advance(3600)
    result = backfill(ports, "alice", job.job_id, live.scheduled_at, live.scheduled_at + timedelta(hours=1))
    # Then it is present, and no second row of the slot exists
    assert (result.created, result.present) == (0, 1)
    assert [e.execution_id for e in ports.store.executions_of_job(job.job_id, limit=10)].count(live.execution_id) == 1


def test_slots_skipped_after_a_backfilled_one_in_a_missed_span_are_each_in_a_skip_record(ports, clock):
    """A span of missed slots with a backfilled one in its middle: the pre-loader's plan skips the others (catch-up
    none), and the skip records count every skipped slot once, the backfilled slot in none (it is its row's).
    The slots after the backfilled one were once in no record (the simulation, seed 95 with --edits --run-now
    --backfill)."""
    from duetime.service.dispatch import preload

    # Given an hourly job whose first run (10:00) waits, and an outage of six hours after a pre-load at 09:00
    job = hourly_job(ports, catchUp="none")
    preload(ports, "p")
    clock.advance(6 * 3600 + 600)  # 15:10: 10:00 to 15:00 are missed
    first = datetime(2026, 12, 1, 10, tzinfo=UTC)
    # And the 12:00 slot backfilled meanwhile
    assert backfill(ports, "alice", job.job_id, first + timedelta(hours=2), first + timedelta(hours=3)).created == 1
    # When the pre-loader plans the missed span
    preload(ports, "p")
    rows = ports.store.executions_of_job(job.job_id, limit=100)
    # Then the backfilled slot has its row, the other five are counted by skip records once each
    skipped = {e.scheduled_at: e.skipped_count or 1 for e in rows if e.status == ExecutionStatus.SKIPPED}
    backfilled = [e.scheduled_at for e in rows if e.kind == "backfill"]
    assert backfilled == [first + timedelta(hours=2)]
    assert sum(skipped.values()) == 5, skipped
    # And the chain goes on from the next slot
    assert [e.scheduled_at for e in rows if e.status == ExecutionStatus.SCHEDULED and e.kind == "scheduled"] == [
        first + timedelta(hours=6)
    ]


def test_a_backfill_of_a_max_runs_schedule_stops_at_its_last_slot(ports, clock):
    """Slots after the maxRuns-th are not the schedule's, as those after endAt are not (the simulation, seed 9101
    with every flag: six slots run past a maxRuns 1 job's one)."""
    job = hourly_job(ports, schedule={"cron": "* * * * *", "timeZone": "UTC", "maxRuns": 2})
    clock.advance(10 * 60)  # 09:10: the chain's first row (09:01) still waits, no pre-load ran
    first = datetime(2026, 12, 1, 9, 1, tzinfo=UTC)
    result = backfill(ports, "alice", job.job_id, first, first + timedelta(minutes=9))
    assert (result.created, result.present) == (1, 1)
    assert result.last_slot == first + timedelta(minutes=1)
