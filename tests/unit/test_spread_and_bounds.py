"""Spreading the herd (a deterministic delay per job and slot) and a schedule's bounds, as pure functions."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime, timedelta

from duetime.domain.bounds import first_bounded_slot, first_run_number, following_number, is_last_slot, within_bounds
from duetime.domain.cron import CronSchedule
from duetime.domain.models import Execution, Job, Schedule
from duetime.domain.spread import spread, spread_due

SLOT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
JOBS = [f"j_{hashlib.sha256(str(i).encode()).hexdigest()[:16]}" for i in range(1000)]


def test_a_thousand_hourly_jobs_spread_over_300_seconds_land_within_it_evenly_and_the_same_every_time() -> None:
    # Given 1,000 jobs on `0 * * * *` with jitterSeconds 300, each run's dueAt for the 10:00 slot
    due = [spread_due(job_id, SLOT, 300) for job_id in JOBS]
    # Then every run is due within 300 s of its slot (never before it)
    assert all(SLOT <= at < SLOT + timedelta(seconds=300) for at in due)
    # And the same job and slot always give the same delay (previews, dispatch and claim agree)
    assert due == [spread_due(job_id, SLOT, 300) for job_id in JOBS]
    # And the runs are spread within 10% of uniform per minute (200 a minute)
    per_minute = Counter(int((at - SLOT).total_seconds()) // 60 for at in due)
    assert sorted(per_minute) == [0, 1, 2, 3, 4]
    assert all(180 <= count <= 220 for count in per_minute.values()), per_minute
    # And not into one second: no second holds more than a handful of the thousand
    per_second = Counter(int((at - SLOT).total_seconds()) for at in due)
    assert max(per_second.values()) <= 10


def test_the_spread_changes_with_the_slot_and_is_zero_without_jitter() -> None:
    job_id = JOBS[0]
    assert spread(job_id, SLOT, 0) == timedelta(0)
    delays = {spread(job_id, SLOT + timedelta(hours=h), 3600) for h in range(24)}
    assert len(delays) > 20  # not the same second every hour
    assert all(timedelta(0) <= d < timedelta(seconds=3600) for d in delays)
    assert all(d.microseconds % 1000 == 0 for d in delays)  # whole milliseconds, as rows store times


def job(**schedule: object) -> Job:
    return Job.model_validate(
        {
            "name": "b",
            "handler": "demo.echo",
            "schedule": {"cron": "0 * * * *", **schedule},
            "jobId": "j_1",
            "owner": "alice",
            "createdAt": SLOT - timedelta(days=1),
            "updatedAt": SLOT - timedelta(days=1),
        }
    )


def row(slot: datetime, number: int | None, kind: str = "scheduled") -> Execution:
    return Execution.model_validate(
        {"executionId": "j_1.x", "jobId": "j_1", "scheduledAt": slot, "dueAt": slot, "runNumber": number, "kind": kind}
    )


def test_start_at_bounds_a_cron_schedule_from_below() -> None:
    cron = CronSchedule("0 * * * *", "UTC")
    later = Schedule(cron="0 * * * *", start_at=SLOT + timedelta(days=2, minutes=30))
    assert first_bounded_slot(cron, later, SLOT) == SLOT + timedelta(days=2, hours=1)
    on_the_hour = Schedule(cron="0 * * * *", start_at=SLOT + timedelta(days=2))
    assert first_bounded_slot(cron, on_the_hour, SLOT) == SLOT + timedelta(days=2)  # inclusive
    past = Schedule(cron="0 * * * *", start_at=SLOT - timedelta(days=2))
    assert first_bounded_slot(cron, past, SLOT) == SLOT + timedelta(hours=1)


def test_max_runs_counts_slots_on_the_rows_and_end_at_is_inclusive() -> None:
    cron = CronSchedule("0 * * * *", "UTC")
    bounded = job(maxRuns=3)
    assert first_run_number(bounded.schedule) == 1 and first_run_number(job().schedule) is None
    assert following_number(row(SLOT, 2)) == 3 and following_number(row(SLOT, None)) is None
    assert within_bounds(bounded.schedule, SLOT, 3) and not within_bounds(bounded.schedule, SLOT, 4)
    assert not is_last_slot(bounded, row(SLOT, 2), cron) and is_last_slot(bounded, row(SLOT, 3), cron)
    ends = job(endAt=SLOT + timedelta(hours=2))
    assert within_bounds(ends.schedule, SLOT + timedelta(hours=2), 1)
    assert not within_bounds(ends.schedule, SLOT + timedelta(hours=2, seconds=1), 1)
    assert not is_last_slot(ends, row(SLOT + timedelta(hours=1), 1), cron)
    assert is_last_slot(ends, row(SLOT + timedelta(hours=2), 1), cron)
    # A run-now is never the schedule's last slot, nor is an unbounded schedule's run
    assert not is_last_slot(bounded, row(SLOT, 3, kind="manual"), cron)
    assert not is_last_slot(job(), row(SLOT, None), cron)
