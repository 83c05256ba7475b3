"""Interval schedules: parsing, the anchor grid, and elapsed time across DST changes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from duetime.domain.errors import InvalidSchedule
from duetime.domain.interval import IntervalSchedule, parse_every
from duetime.domain.models import Schedule
from duetime.domain.recurrence import recurrence_of
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

NEW_YORK = ZoneInfo("America/New_York")


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(minutes=90)),
        ("2h", timedelta(hours=2)),
        ("1d12h", timedelta(hours=36)),
        ("1m", timedelta(minutes=1)),
        ("366d", timedelta(days=366)),
        ("rate(90 minutes)", timedelta(minutes=90)),
        ("rate(1 minute)", timedelta(minutes=1)),
        ("1s", timedelta(seconds=1)),
        ("30s", timedelta(seconds=30)),
        ("1m30s", timedelta(seconds=90)),
        ("1d0h0m1s", timedelta(days=1, seconds=1)),
        ("90s", timedelta(seconds=90)),
        ("rate(1 second)", timedelta(seconds=1)),
        ("rate(45 seconds)", timedelta(seconds=45)),
        ("rate(1 hour)", timedelta(hours=1)),
        ("rate(2 days)", timedelta(days=2)),
    ],
)
def test_every_takes_compact_and_eventbridge_spellings(text: str, span: timedelta) -> None:
    assert parse_every(text) == span


@pytest.mark.parametrize(
    "text",
    ["", "90", "m", "0m", "0s", "s", "1.5s", "500ms", "1s1m", "0m0s", "rate(0 seconds)", "rate(1 secs)",
     "1.5h", "90 m", "1m1h", "h30m1", "367d", "rate(0 minutes)", "rate(90 mins)",
     "rate(90minutes)", "rate(1 week)", "RATE(1 hour)", "-5m", "\uff19m"],
)  # fmt: skip
def test_bad_intervals_name_the_field(text: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        parse_every(text)
    assert info.value.field == "schedule.every"


def test_slots_are_the_anchor_plus_whole_intervals() -> None:
    anchor = datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC)
    schedule = IntervalSchedule("90m", anchor)
    assert schedule.next_after(anchor - timedelta(days=3)) == anchor  # the anchor itself is the first slot
    assert schedule.next_after(anchor) == anchor + timedelta(minutes=90)
    assert schedule.next_after(anchor + timedelta(minutes=200)) == anchor + timedelta(minutes=270)
    assert schedule.next_after(anchor + timedelta(minutes=270)) == anchor + timedelta(minutes=360)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 366 * 24 * 60),
    st.datetimes(datetime(2000, 1, 1), datetime(2040, 1, 1), timezones=st.just(UTC)),
    st.integers(-(10**11), 10**11),
)
def test_every_slot_lies_on_the_anchor_grid_wherever_you_start(minutes: int, anchor: datetime, offset_us: int) -> None:
    """Restarting from any instant (a restart, a resume) lands on the same grid: stable slots."""
    schedule = IntervalSchedule(f"{minutes}m", anchor)
    after = anchor + timedelta(microseconds=offset_us)
    slot = schedule.next_after(after)
    interval = timedelta(minutes=minutes)
    assert slot > after
    assert (slot - anchor) % interval == timedelta(0) and slot >= anchor
    assert slot - after <= interval or after < anchor


@pytest.mark.parametrize(
    ("anchor_local", "change"),
    [
        ("2026-03-07T20:00", "spring-forward 2026-03-08 02:00 EST -> 03:00 EDT"),
        ("2026-10-31T20:00", "fall-back 2026-11-01 02:00 EDT -> 01:00 EST"),
    ],
)
def test_interval_is_elapsed_time_across_dst(anchor_local: str, change: str) -> None:
    anchor = datetime.fromisoformat(anchor_local).replace(tzinfo=NEW_YORK)
    schedule = recurrence_of(Schedule(every="90m", start_at=anchor, time_zone="America/New_York"))
    assert schedule is not None
    runs = schedule.runs(anchor, 12)  # 18 hours: across the change
    gaps = {b - a for a, b in itertools.pairwise([anchor.astimezone(UTC), *runs])}
    assert gaps == {timedelta(minutes=90)}, change
    walls = [r.astimezone(NEW_YORK) for r in runs]
    offsets = {w.utcoffset() for w in walls}
    assert len(offsets) == 2, "the window crosses the change"
    # The wall clock shows the change: one local step is 90 minutes +/- the hour the clock moved.
    local_steps = {b.replace(tzinfo=None) - a.replace(tzinfo=None) for a, b in itertools.pairwise(walls)}
    assert local_steps == {
        timedelta(minutes=90),
        timedelta(minutes=90) + (walls[-1].utcoffset() - walls[0].utcoffset()),
    }


def test_schedule_takes_exactly_one_kind_and_start_at_bounds_cron_too() -> None:
    assert Schedule(every="90m").is_recurring
    assert Schedule(cron="* * * * *").is_recurring
    assert not Schedule(at=datetime(2026, 12, 1, tzinfo=UTC)).is_recurring
    with pytest.raises(ValidationError, match="exactly one"):
        Schedule(cron="* * * * *", every="90m")
    # startAt anchors an interval and is the lower bound of a cron schedule (an `at` refuses it at submit)
    assert Schedule(cron="* * * * *", start_at=datetime(2026, 12, 1, tzinfo=UTC)).is_recurring


def test_every_second_lies_on_its_anchor_grid() -> None:
    """A 1-second interval: slots every whole second from a millisecond anchor, never drifting."""
    anchor = datetime(2026, 3, 8, 6, 59, 58, 250_000, tzinfo=UTC)
    schedule = IntervalSchedule("1s", anchor)
    got = schedule.runs(anchor, 4)
    assert got == [anchor + timedelta(seconds=k) for k in (1, 2, 3, 4)]
    assert schedule.next_after(anchor + timedelta(days=400, microseconds=1)) == anchor + timedelta(days=400, seconds=1)


def test_below_a_second_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSchedule, match="from 1 second to 366 days") as info:
        parse_every("0s")
    assert info.value.field == "schedule.every"
