"""Pure logic: which missed cron slots run and which are skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime.domain.catchup import MAX_CATCH_UP_RUNS, plan_before, plan_catch_up
from duetime.domain.cron import CronSchedule
from duetime.domain.models import CatchUp

EVERY_MINUTE = CronSchedule("* * * * *", "UTC")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def minutes(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def test_a_slot_a_few_seconds_late_is_not_missed():
    assert plan_catch_up(EVERY_MINUTE, T0, T0 + timedelta(seconds=20), CatchUp.NONE, None) is None


def test_latest_runs_the_most_recent_missed_slot_and_skips_the_rest():
    plan = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(5) + timedelta(seconds=30), CatchUp.LATEST, None)
    assert plan.run_slots == [minutes(5)]
    assert plan.skipped_count == 5 and plan.skip_reason == "catch-up latest"
    assert plan.next_slot == minutes(6)


def test_all_runs_every_missed_slot_in_order():
    plan = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(3) + timedelta(seconds=1), CatchUp.ALL, None)
    assert plan.run_slots == [minutes(0), minutes(1), minutes(2), minutes(3)]
    assert plan.skipped_count == 0 and plan.next_slot == minutes(4)


def test_none_skips_every_missed_slot():
    plan = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(3) + timedelta(seconds=1), CatchUp.NONE, None)
    assert plan.run_slots == [] and plan.skipped_count == 4 and plan.next_slot == minutes(4)


def test_the_starting_deadline_skips_runs_that_would_start_too_late():
    plan = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(5) + timedelta(seconds=30), CatchUp.ALL, 150)
    assert plan.run_slots == [minutes(3), minutes(4), minutes(5)]
    assert plan.skipped_count == 3
    late = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(5) + timedelta(seconds=30), CatchUp.LATEST, 10)
    assert late.run_slots == [] and late.skip_reason == "starting deadline"


def test_ten_thousand_missed_minutes_are_planned_in_bounded_work():
    now = minutes(10_000) + timedelta(seconds=5)
    plan = plan_catch_up(EVERY_MINUTE, minutes(0), now, CatchUp.ALL, None)
    assert len(plan.run_slots) == MAX_CATCH_UP_RUNS
    assert plan.run_slots[-1] == minutes(10_000)
    assert plan.skipped_count == 10_001 - MAX_CATCH_UP_RUNS
    assert plan.next_slot == minutes(10_001)


def test_a_plan_cut_at_a_later_planned_row_keeps_its_part():
    # 09:00 to 09:05 missed; a row of 09:03 plans the slots from there itself
    latest = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(5) + timedelta(seconds=30), CatchUp.LATEST, None)
    part = plan_before(latest, EVERY_MINUTE, minutes(0), minutes(3))
    assert part.run_slots == [] and part.skipped_count == 3 and part.skip_reason == "catch-up latest"
    assert part.next_slot == minutes(3)
    every = plan_catch_up(EVERY_MINUTE, minutes(0), minutes(5) + timedelta(seconds=30), CatchUp.ALL, None)
    part = plan_before(every, EVERY_MINUTE, minutes(0), minutes(3))
    assert part.run_slots == [minutes(0), minutes(1), minutes(2)] and part.skipped_count == 0
    assert part.skip_reason is None and part.next_slot == minutes(3)
