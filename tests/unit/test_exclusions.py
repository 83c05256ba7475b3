"""Excluded dates: parsing, local dates in the job's zone, previews and catch-up that leave them out."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from duetime.domain.catchup import plan_catch_up
from duetime.domain.cron import CronSchedule
from duetime.domain.exclusions import DateRange, Exclusions, parse_bounded_exclusion, parse_exclusion
from duetime.domain.interval import IntervalSchedule
from duetime.domain.models import CatchUp, JobSpec
from duetime.domain.recurrence import included_runs, next_included
from pydantic import ValidationError


def test_entries_are_dates_or_inclusive_ranges() -> None:
    assert parse_exclusion("2026-12-25") == DateRange(date(2026, 12, 25), date(2026, 12, 25))
    assert parse_exclusion("2026-12-24/2026-12-26") == DateRange(date(2026, 12, 24), date(2026, 12, 26))


@pytest.mark.parametrize(
    ("entry", "why"),
    [("2026-02-30", "not a calendar date"), ("2026-12-26/2026-12-24", "ends before"), ("xmas", "neither"),
     ("2026-12-25/", "neither"), ("26-12-25", "neither"), ("2026-12-25T00:00", "neither")],
)  # fmt: skip
def test_bad_entries_say_why_against_exclude(entry: str, why: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate({"name": "n", "handler": "h", "schedule": {"cron": "0 9 * * *"}, "exclude": [entry]})
    error = info.value.errors()[0]
    assert error["loc"][0] == "exclude" and why in error["msg"]


def test_a_slot_is_excluded_by_its_local_date() -> None:
    # 23:30 UTC on the 24th is already the 25th in Berlin, and still the 24th in New York.
    slot = datetime(2026, 12, 24, 23, 30, tzinfo=UTC)
    assert Exclusions(["2026-12-25"], "Europe/Berlin").excludes(slot)
    assert not Exclusions(["2026-12-25"], "America/New_York").excludes(slot)


def test_preview_of_business_days_skips_the_holidays() -> None:
    holidays = Exclusions(["2026-12-24/2026-12-26", "2026-12-31", "2027-01-01"], "Europe/Berlin")
    runs = included_runs(CronSchedule("0 9 * * 1-5", "Europe/Berlin"), holidays, datetime(2026, 12, 22, tzinfo=UTC), 6)
    assert [r.date() for r in runs] == [
        date(2026, 12, 22), date(2026, 12, 23), date(2026, 12, 28), date(2026, 12, 29), date(2026, 12, 30),
        date(2027, 1, 4),
    ]  # fmt: skip


def test_a_long_exclusion_is_jumped_over_by_dates() -> None:
    every_minute = CronSchedule("* * * * *", "America/Santiago")  # Santiago's DST gap is at local midnight
    year = Exclusions(["2026-01-01/2026-12-31"], "America/Santiago")
    (first,) = included_runs(every_minute, year, datetime(2026, 1, 1, 12, tzinfo=UTC), 1)
    assert first.astimezone(year.zone).replace(tzinfo=None) == datetime(2027, 1, 1, 0, 0)


def test_catch_up_never_runs_an_excluded_missed_slot() -> None:
    daily = CronSchedule("0 9 * * *", "UTC")
    excluded = Exclusions(["2026-12-03/2026-12-04"], "UTC").excludes
    first = datetime(2026, 12, 2, 9, tzinfo=UTC)
    now = datetime(2026, 12, 4, 12, tzinfo=UTC)
    plan = plan_catch_up(daily, first, now, CatchUp.LATEST, None, excluded)
    assert plan is not None
    assert plan.run_slots == [first]  # the 3rd and 4th are excluded: the latest runnable one is the 2nd
    assert plan.skipped_count == 2 and plan.next_slot == first + timedelta(days=3)


@pytest.mark.parametrize("last", ["2200-12-31", "9999-12-31"])
def test_an_exclusion_reaching_the_horizon_leaves_no_slot_instead_of_overflowing(last: str) -> None:
    # 9999-12-31: a range stored before the horizon bound; the day after it is past Python's calendar
    every_minute = IntervalSchedule("1m", datetime(2026, 12, 1, tzinfo=UTC))
    exclusions = Exclusions([f"2026-12-01/{last}"], "UTC")
    after = datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert next_included(every_minute, exclusions, after) is None
    assert included_runs(every_minute, exclusions, after, 5) == []
    # A range ending before the horizon still has the slot after it
    shorter = Exclusions(["2026-12-01/2199-12-31"], "UTC")
    assert next_included(every_minute, shorter, after) == datetime(2200, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("entry", ["1960-01-01", "0001-01-01/2026-12-01", "2026-12-01/2201-01-01", "9999-12-31"])
def test_a_requests_dates_outside_the_horizon_are_refused_but_stored_ones_still_load(entry: str) -> None:
    with pytest.raises(ValueError, match="out of range: duetime plans between 2000-01-01 and 2200-12-31"):
        parse_bounded_exclusion(entry)
    parse_exclusion(entry)  # a job or calendar stored before the bound is read as it was
