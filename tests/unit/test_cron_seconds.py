"""Cron with a seconds field (six fields, seconds first): the parser, exact DST days at seconds granularity,
Quartz day elements with a seconds field, and a property test against a cron daemon that ticks every second.

Expected UTC times are written from the tz database rules (tests/unit/test_cron.py checks the transition
instants they rely on), never copied from the engine's output.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from duetime.domain.cron import FOLDS, GAPS, CronSchedule, Fold, Gap
from duetime.domain.errors import InvalidSchedule
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.unit.test_cron_properties import DAYS, MONTHS, Expr, Field, engine, expressions, fields, transitions, wall

SECOND = timedelta(seconds=1)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def runs(
    expression: str, zone: str, after: str, count: int, gap: Gap | None = None, fold: Fold | None = None
) -> list[str]:
    out = CronSchedule(expression, zone, gap=gap, fold=fold).runs(utc(after), count)
    return [r.strftime("%Y-%m-%d %H:%M:%S") for r in out]


# --------------------------------------------------------------------------------------------------
# Parsing


def test_six_fields_are_seconds_first() -> None:
    assert runs("*/5 * * * * *", "UTC", "2026-05-01 10:00:00", 4) == [
        "2026-05-01 10:00:05",
        "2026-05-01 10:00:10",
        "2026-05-01 10:00:15",
        "2026-05-01 10:00:20",
    ]
    assert runs("15,45 30 9 * * *", "UTC", "2026-05-01 09:30:15", 3) == [
        "2026-05-01 09:30:45",
        "2026-05-02 09:30:15",
        "2026-05-02 09:30:45",
    ]
    # Every second; from inside a second (microseconds), the next whole one.
    schedule = CronSchedule("* * * * * *", "UTC")
    assert schedule.next_after(utc("2026-05-01 23:59:59.250")) == utc("2026-05-02 00:00:00")
    assert schedule.has_seconds
    assert not CronSchedule("* * * * *", "UTC").has_seconds


def test_five_fields_are_six_with_second_zero() -> None:
    """A five-field expression is exactly cron's: each run at second 0, as the six-field `0 <fields>`."""
    for text in ("*/15 * * * *", "30 2 * * *", "0 0 L * ?", "5 4 * * 5#2", "@hourly"):
        for zone in ("America/New_York", "Australia/Lord_Howe"):
            five = CronSchedule(text, zone)
            six = CronSchedule(text if text.startswith("@") else f"0 {text}", zone)
            assert five.is_fixed_time == six.is_fixed_time
            after = utc("2026-03-07 12:00:30")
            assert five.runs(after, 50) == six.runs(after, 50)
            assert all(r.second == 0 and r.microsecond == 0 for r in five.runs(after, 50))


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("60 * * * * *", "second: 60 is outside 0-59"),
        ("*/0 * * * * *", "second: step must be at least 1"),
        ("30-10 * * * * *", "second: range '30-10' is reversed"),
        ("x * * * * *", "second: cannot parse 'x'"),
        ("0 60 * * * *", "minute: 60 is outside 0-59"),
        ("0 0 0 * * * *", "expected 5 fields (or 6, seconds first), got 7"),
    ],
)
def test_invalid_seconds_field_names_it(expression: str, words: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        CronSchedule(expression, "UTC")
    assert info.value.field == "schedule.cron"
    assert words in str(info.value)


def test_fixed_time_needs_an_unstarred_seconds_field() -> None:
    assert CronSchedule("30 30 2 * * *", "UTC").is_fixed_time
    assert not CronSchedule("* 30 2 * * *", "UTC").is_fixed_time
    assert not CronSchedule("*/10 30 2 * * *", "UTC").is_fixed_time
    assert not CronSchedule("0 */5 * * * *", "UTC").is_fixed_time


# --------------------------------------------------------------------------------------------------
# DST days at seconds granularity (New York, 2026: 03-08 02:00 EST -> 03:00 EDT at 07:00 UTC;
# 11-01 02:00 EDT -> 01:00 EST at 06:00 UTC; Lord Howe: 04-04 02:00 +11 -> 01:30 +10:30 at 15:00 UTC)


def test_fixed_time_in_a_gap_runs_once_at_the_gap_end() -> None:
    # 02:30:30 does not exist on 03-08: it runs at 03:00:00 EDT (07:00:00 UTC), then 02:30:30 EDT the next day.
    assert runs("30 30 2 * * *", "America/New_York", "2026-03-07 12:00", 3) == [
        "2026-03-08 07:00:00",
        "2026-03-09 06:30:30",
        "2026-03-10 06:30:30",
    ]
    # Several matched seconds in the gap, and 03:00:00 itself, are one run.
    assert runs("0,30 0,30 2,3 * * *", "America/New_York", "2026-03-08 06:59:00", 3) == [
        "2026-03-08 07:00:00",
        "2026-03-08 07:00:30",
        "2026-03-08 07:30:00",
    ]


def test_every_few_seconds_skips_the_gap() -> None:
    # Its runs follow the clock: 01:59:55 EST, then nothing until 03:00:00 EDT (same instant plus 5 s).
    assert runs("*/5 * * * * *", "America/New_York", "2026-03-08 06:59:50", 3) == [
        "2026-03-08 06:59:55",
        "2026-03-08 07:00:00",
        "2026-03-08 07:00:05",
    ]
    # Every second of the 02:00 hour only: none exists that day, so the next is the day after.
    assert runs("* * 2 * * *", "America/New_York", "2026-03-08 06:00", 2) == [
        "2026-03-09 06:00:00",
        "2026-03-09 06:00:01",
    ]
    # Under gap=shift, the hour's seconds run once when the gap ends.
    assert runs("* * 2 * * *", "America/New_York", "2026-03-08 06:00", 2, gap="shift") == [
        "2026-03-08 07:00:00",
        "2026-03-09 06:00:00",
    ]


def test_every_few_seconds_runs_both_occurrences_of_a_fold() -> None:
    # 01:59:50 EDT (05:59:50 UTC), then the clock shows 01:00:00 EST (06:00:00 UTC) and runs go on: 10 s apart.
    assert runs("*/10 * * * * *", "America/New_York", "2026-11-01 05:59:40", 3) == [
        "2026-11-01 05:59:50",
        "2026-11-01 06:00:00",
        "2026-11-01 06:00:10",
    ]
    # Every second of 01:30 at its first occurrence only (fold=first): 60 runs, then the next day.
    got = runs("* 30 1 * * *", "America/New_York", "2026-11-01 05:00", 61, fold="first")
    assert got[0] == "2026-11-01 05:30:00" and got[59] == "2026-11-01 05:30:59"
    assert got[60] == "2026-11-02 06:30:00"
    # fold=last: at the second occurrence (EST).
    got = runs("* 30 1 * * *", "America/New_York", "2026-11-01 05:00", 61, fold="last")
    assert got[0] == "2026-11-01 06:30:00" and got[60] == "2026-11-02 06:30:00"


def test_fixed_time_fold_runs_once_by_default_and_twice_under_both() -> None:
    assert runs("15 30 1 * * *", "America/New_York", "2026-10-31 12:00", 2) == [
        "2026-11-01 05:30:15",
        "2026-11-02 06:30:15",
    ]
    assert runs("15 30 1 * * *", "America/New_York", "2026-10-31 12:00", 3, fold="both") == [
        "2026-11-01 05:30:15",
        "2026-11-01 06:30:15",
        "2026-11-02 06:30:15",
    ]


def test_thirty_minute_fold_at_seconds_granularity() -> None:
    # Lord Howe 2026-04-04: 02:00 +11 -> 01:30 +10:30 (15:00 UTC); 01:45:30 happens at 14:45:30 and 15:15:30.
    assert runs("30 45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", 2) == [
        "2026-04-04 14:45:30",
        "2026-04-05 15:15:30",  # +10:30 from then on
    ]
    assert runs("30 45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", 2, fold="last") == [
        "2026-04-04 15:15:30",
        "2026-04-05 15:15:30",
    ]


# --------------------------------------------------------------------------------------------------
# Quartz day elements with a seconds field


def test_quartz_day_elements_with_seconds() -> None:
    # The last day of the month at 12:00:30 (April has 30 days; May 31).
    assert runs("30 0 12 L * ?", "UTC", "2026-04-01 00:00", 2) == ["2026-04-30 12:00:30", "2026-05-31 12:00:30"]
    # The third Friday (5#3) at 09:15:45: 2026-05-15, 2026-06-19.
    assert runs("45 15 9 ? * 5#3", "UTC", "2026-05-01 00:00", 2) == ["2026-05-15 09:15:45", "2026-06-19 09:15:45"]
    # The last weekday of the month, every 20 seconds of 23:59: 2026-05-29 is a Friday (31 is a Sunday).
    assert runs("*/20 59 23 LW * ?", "UTC", "2026-05-01 00:00", 4) == [
        "2026-05-29 23:59:00",
        "2026-05-29 23:59:20",
        "2026-05-29 23:59:40",
        "2026-06-30 23:59:00",
    ]
    # The weekday nearest the 1st (Saturday 2026-08-01 -> Monday the 3rd), in New York, at 00:00:10 local.
    assert runs("10 0 0 1W * ?", "America/New_York", "2026-07-15 00:00", 1) == ["2026-08-03 04:00:10"]
    # The last Sunday of March in London, 01:30:30 local: that hour does not exist (shifted to 02:00 BST).
    assert runs("30 30 1 ? 3 0L", "Europe/London", "2026-01-01 00:00", 1) == ["2026-03-29 01:00:00"]


# --------------------------------------------------------------------------------------------------
# Against a cron daemon that ticks every second


@dataclass(frozen=True)
class SecondsExpr:
    """A six-field expression with the values it denotes (the day fields as the minute daemon reads them)."""

    second: Field
    rest: Expr

    @property
    def text(self) -> str:
        return f"{self.second.text} {self.rest.text}"

    @property
    def fixed(self) -> bool:
        return not self.second.text.startswith("*") and self.rest.fixed

    def matches(self, wall_time: datetime) -> bool:
        return wall_time.second in self.second.values and self.rest.matches(wall_time)


def reference_seconds(
    expr: SecondsExpr, zone: str, start: datetime, end: datetime, gap: Gap | None, fold: Fold | None
) -> list[datetime]:
    """A second-ticking cron daemon: its runs in (start, end], start and end whole UTC seconds. As the minute
    daemon of test_cron_properties: shift runs once at a jump over a matched wall second, skip never; fold
    `first` runs a wall second the first time the clock shows it, `last` the last time, `both` each time."""
    gap = gap or ("shift" if expr.fixed else "skip")
    fold = fold or ("first" if expr.fixed else "both")
    tz = ZoneInfo(zone)
    lookback = timedelta(minutes=90)  # longer than any fold in the zones drawn
    last_shown: dict[datetime, datetime] = {}
    probe = start - lookback
    while probe < end + lookback:
        probe += SECOND
        last_shown[wall(probe, tz)] = probe
    u = start - lookback
    previous = wall(u, tz)
    seen: set[datetime] = set()
    out: list[datetime] = []
    while u < end:
        u += SECOND
        now = wall(u, tz)
        run = False
        if gap == "shift" and now - previous > SECOND:
            skipped = previous + SECOND
            while skipped < now and not run:  # the wall clock jumped forward over these seconds
                run = expr.matches(skipped)
                skipped += SECOND
        if expr.matches(now):
            if fold == "first":
                run = run or now not in seen
            elif fold == "last":
                run = run or last_shown[now] == u
            else:
                run = True
        seen.add(now)
        if run and u > start:
            out.append(u)
        previous = now
    return out


SECONDS_ZONES = ["America/New_York", "Europe/Dublin", "Australia/Lord_Howe", "America/Havana"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_equals_seconds_daemon(data: st.DataObject) -> None:
    """Around a DST change, each DST policy (or the default), to the second."""
    zone = data.draw(st.sampled_from(SECONDS_ZONES))
    year = data.draw(st.integers(2000, 2037))
    changes = transitions(zone, year)
    assume(changes)
    anchor = data.draw(st.sampled_from(changes))
    start = anchor.replace(second=0, microsecond=0) - timedelta(seconds=data.draw(st.integers(0, 3600)))
    end = start + timedelta(minutes=90)
    tz = ZoneInfo(zone)
    day: date = wall(anchor, tz).date()
    rest = data.draw(expressions(day=day))
    second = data.draw(fields(0, 59, hot=[0, 30, 59]))
    expr = SecondsExpr(second, rest)
    gap = data.draw(st.sampled_from([None, *GAPS]))
    fold = data.draw(st.sampled_from([None, *FOLDS]))
    schedule = CronSchedule(expr.text, zone, gap=gap, fold=fold)
    assert schedule.is_fixed_time == expr.fixed
    after = start + timedelta(microseconds=data.draw(st.integers(0, 999_999)))
    got = engine(schedule, after, end)
    expected = [r for r in reference_seconds(expr, zone, start, end, gap, fold) if r > after]
    assert got == expected, (expr.text, zone, after, gap, fold)
    assert all(a < b for a, b in itertools.pairwise(got))


def test_names_still_parse_in_six_fields() -> None:
    """Month and weekday names keep their places, one field to the right."""
    assert MONTHS[0] == "JAN" and DAYS[1] == "MON"
    assert runs("0 0 9 * JAN MON", "UTC", "2026-01-01 00:00", 2) == ["2026-01-05 09:00:00", "2026-01-12 09:00:00"]


def test_the_cli_preview_prints_seconds_in_utc_and_local_time(capsys: pytest.CaptureFixture[str]) -> None:
    from duetime.cli.main import main

    args = ["preview", "--cron", "*/20 * * * * *", "--tz", "America/New_York", "--from", "2026-03-08T06:59:30Z"]
    main([*args, "--count", "2"])
    assert capsys.readouterr().out.splitlines() == [
        "2026-03-08T06:59:40.000Z  2026-03-08T01:59:40-05:00 America/New_York",
        "2026-03-08T07:00:00.000Z  2026-03-08T03:00:00-04:00 America/New_York",
    ]
