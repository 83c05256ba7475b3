"""Property tests of the cron engine against a brute-force cron daemon simulation.

The reference ticks a clock once per UTC minute, reads the local wall clock like a cron daemon would,
and applies the DST rules directly (Vixie cron / cronie):

* fixed-time schedules (minute and hour fields do not start with `*`): when the wall clock jumps
  forward, run once if any matched wall time was skipped; run a matched wall time only the first
  time the clock shows it (so a repeated hour runs once);
* other schedules: run whenever the wall clock shows a matched time (skipped times are lost,
  repeated ones run again).

A schedule's DST policy replaces those two rules when given: gap `shift` runs once at the jump when a
matched wall time was skipped, `skip` never; fold `first` runs a wall time the first time the clock shows
it, `last` the last time, `both` each time.

Expressions are generated together with the value sets they denote, so the reference matcher does
not share the engine's parser.
"""

from __future__ import annotations

import itertools
import os
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from duetime.domain.cron import FOLDS, GAPS, CronSchedule, Fold, Gap
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)

DST_ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Beirut",
    "Asia/Gaza",
    "Africa/Cairo",
    "Africa/Casablanca",
    "America/Asuncion",
    "America/Scoresbysund",
    "America/St_Johns",
    "Antarctica/Troll",
    "Europe/Dublin",
    "Pacific/Apia",
    "Pacific/Chatham",
    "Pacific/Kwajalein",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "UTC",
]
ZONES = DST_ZONES + sorted(zoneinfo.available_timezones())[::9]

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

# Minutes of reference-daemon ticks an example (15 s of CPU for 200 examples on a quiet machine): `make test` runs
# the unit tier niced beside a dozen processes, where one of these once passed pytest-timeout's 300 s.
SLOW_PROPERTY = pytest.mark.timeout(1200)
# Examples of each slow property a run draws: 100 in `make test` (each run draws new ones, so the runs add up),
# more with DUETIME_PROPERTY_EXAMPLES (say 2000) for a deep look after a change to the cron engine.
SLOW_EXAMPLES = int(os.environ.get("DUETIME_PROPERTY_EXAMPLES", "100"))


# --------------------------------------------------------------------------------------------------
# Expressions with their meaning


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]


@dataclass(frozen=True)
class Expr:
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    @property
    def fixed(self) -> bool:
        return not (self.minute.text.startswith("*") or self.hour.text.startswith("*"))

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minute.values or wall.hour not in self.hour.values:
            return False
        if wall.month not in self.month.values:
            return False
        in_dom = wall.day in self.dom.values
        in_dow = wall.isoweekday() % 7 in {d % 7 for d in self.dow.values}
        if self.dom.text.startswith("*") or self.dow.text.startswith("*"):
            return in_dom and in_dow
        return in_dom or in_dow


def _name(value: int, names: list[str] | None, use_name: bool, low: int) -> str:
    if names is not None and use_name and value - low < len(names):
        name = names[value - low]
        return name if value % 2 else name.lower()
    return str(value)


@st.composite
def elements(draw: st.DrawFn, low: int, high: int, names: list[str] | None, hot: list[int]) -> Field:
    """One list element and its values; `hot` values are drawn more often (DST hours)."""
    value = st.one_of(st.sampled_from(hot), st.integers(low, high)) if hot else st.integers(low, high)
    use_name = draw(st.booleans())
    kind = draw(st.sampled_from(["value", "value", "range", "range-step", "start-step", "star", "star-step"]))
    if kind == "star":
        return Field("*", frozenset(range(low, high + 1)))
    if kind == "star-step":
        step = draw(st.integers(1, high - low + 1))
        return Field(f"*/{step}", frozenset(range(low, high + 1, step)))
    a = draw(value)
    if kind == "value":
        return Field(_name(a, names, use_name, low), frozenset({a}))
    if kind == "start-step":
        step = draw(st.integers(1, high - low + 1))
        return Field(f"{a}/{step}", frozenset(range(a, high + 1, step)))
    b = draw(st.integers(a, high))
    text = f"{_name(a, names, use_name, low)}-{_name(b, names, use_name, low)}"
    if kind == "range":
        return Field(text, frozenset(range(a, b + 1)))
    step = draw(st.integers(1, high - low + 1))
    return Field(f"{text}/{step}", frozenset(range(a, b + 1, step)))


@st.composite
def fields(draw: st.DrawFn, low: int, high: int, names: list[str] | None = None, hot: list[int] | None = None) -> Field:
    if draw(st.integers(0, 9)) < 3:
        return Field("*", frozenset(range(low, high + 1)))
    parts = draw(st.lists(elements(low, high, names, hot or []), min_size=1, max_size=3))
    return Field(",".join(p.text for p in parts), frozenset().union(*(p.values for p in parts)))


@st.composite
def expressions(draw: st.DrawFn, day: date | None = None) -> Expr:
    """A valid expression; day fields are mostly `*` or aimed at `day` so windows see runs."""
    minute = draw(fields(0, 59, hot=[0, 15, 30, 45, 59]))
    hour = draw(fields(0, 23, hot=[0, 1, 2, 3, 22, 23]))

    def day_field(low: int, high: int, names: list[str] | None, aim: int | None) -> Field:
        choice = draw(st.integers(0, 9))
        if choice < 6:
            return Field("*", frozenset(range(low, high + 1)))
        if choice < 8 and aim is not None:
            return Field(str(aim), frozenset({aim}))
        return draw(fields(low, high, names))

    dom = day_field(1, 31, None, day.day if day else None)
    month = day_field(1, 12, MONTHS, day.month if day else None)
    dow = day_field(0, 7, DAYS, day.isoweekday() % 7 if day else None)
    expr = Expr(minute, hour, dom, month, dow)
    # Skip the few unsatisfiable day combinations (the engine rejects them; tested elsewhere).
    and_days = dom.text.startswith("*") or dow.text.startswith("*")
    month_max = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if and_days and all(min(dom.values) > month_max[m - 1] for m in month.values):
        expr = Expr(minute, hour, Field("*", frozenset(range(1, 32))), month, dow)
    return expr


# --------------------------------------------------------------------------------------------------
# Time zone helpers (independent of the engine)


@cache
def transitions(zone: str, year: int) -> tuple[datetime, ...]:
    """Instants (UTC) in `year` at which the zone's UTC offset changes (probe 3-hourly, bisect)."""
    tz = ZoneInfo(zone)
    out: list[datetime] = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=3)
    while t < end:
        if t.astimezone(tz).utcoffset() != (t + step).astimezone(tz).utcoffset():
            lo, hi = t, t + step
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) // 2
                if mid.astimezone(tz).utcoffset() == lo.astimezone(tz).utcoffset():
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
        t += step
    return tuple(out)


def wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def minute_walls(first: datetime, last: datetime, tz: ZoneInfo) -> dict[datetime, datetime]:
    """The wall time of every whole UTC minute u from `first` to `last`, as u plus the zone's offset then (so
    still marked UTC: its fields are the wall clock's, and walls compare with walls only). The offset is read at
    each hour's ends and, where they differ, at each minute of it (no zone changes its offset twice within an
    hour): the clock is not asked 8,000 times a window for what a few hundred answers give."""
    out: dict[datetime, datetime] = {}
    hour = first
    while hour <= last:
        offset, after = hour.astimezone(tz).utcoffset(), (hour + HOUR).astimezone(tz).utcoffset()
        for minute in range(60):
            u = hour + minute * MINUTE
            shift = offset if offset == after else u.astimezone(tz).utcoffset()
            assert shift is not None
            out[u] = u + shift
        hour += HOUR
    return out


def reference(
    expr: Expr, zone: str, start: datetime, end: datetime, gap: Gap | None = None, fold: Fold | None = None
) -> list[datetime]:
    """A minute-ticking cron daemon: its runs in (start, end]. start/end are whole UTC minutes.
    Without a policy, a fixed-time expression shifts gaps and runs folds first; others skip and run both."""
    gap = gap or ("shift" if expr.fixed else "skip")
    fold = fold or ("first" if expr.fixed else "both")
    tz = ZoneInfo(zone)
    u = start - timedelta(days=2)
    walls = minute_walls(u, end + timedelta(days=1), tz)
    # The last instant the clock shows each wall minute (looking a day past the window, as no fold is longer).
    last_shown: dict[datetime, datetime] = {}
    probe = u
    while probe < end + timedelta(days=1):
        probe += MINUTE
        last_shown[walls[probe]] = probe
    previous = walls[u]
    seen: set[datetime] = set()
    out: list[datetime] = []
    while u < end:
        u += MINUTE
        now = walls[u]
        run = False
        if gap == "shift":
            skipped = previous + MINUTE
            while skipped < now:  # the wall clock jumped forward over these minutes
                run = run or expr.matches(skipped)
                skipped += MINUTE
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


def engine(schedule: CronSchedule, start: datetime, end: datetime) -> list[datetime]:
    out: list[datetime] = []
    current = start
    while True:
        current = schedule.next_after(current)
        if current > end:
            return out
        out.append(current)


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, datetime, datetime]:
    """A zone and a 3-day window, usually around one of its offset changes."""
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.integers(1990, 2037))
    changes = transitions(zone, year)
    if zone == "Pacific/Apia" and draw(st.booleans()):
        changes = transitions(zone, 2011)  # a whole day skipped (UTC-10 -> UTC+14)
    if changes and draw(st.integers(0, 9)) < 8:
        anchor = draw(st.sampled_from(changes))
    else:
        anchor = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=draw(st.integers(0, 364)))
    start = anchor.replace(second=0, microsecond=0) - timedelta(minutes=draw(st.integers(0, 48 * 60)))
    return zone, start, start + timedelta(days=3)


# --------------------------------------------------------------------------------------------------
# Properties


@SLOW_PROPERTY
@settings(max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_equals_reference_daemon(data: st.DataObject) -> None:
    zone, start, end = data.draw(windows())
    tz = ZoneInfo(zone)
    expr = data.draw(expressions(day=wall(start + timedelta(days=1), tz).date()))
    schedule = CronSchedule(expr.text, zone)
    assert schedule.is_fixed_time == expr.fixed

    # `after` anywhere inside a minute: runs are strictly after it
    after = start + timedelta(seconds=data.draw(st.integers(0, 59)), microseconds=data.draw(st.integers(0, 999)))
    got = engine(schedule, after, end)
    expected = [r for r in reference(expr, zone, start, end) if r > after]
    assert got == expected, (expr.text, zone, after)

    # strictly increasing, aware UTC
    assert all(r.tzinfo is UTC for r in got)
    assert all(a < b for a, b in itertools.pairwise(got))

    for r in got:
        local = r.astimezone(tz)
        if expr.matches(local.replace(tzinfo=None)):
            continue
        # otherwise: a fixed-time run at the end of a gap in which a matched wall time fell
        assert expr.fixed
        before = r - timedelta(seconds=1)
        gap_start = wall(before, tz) + timedelta(seconds=1)
        gap_end = wall(r, tz)
        assert gap_end > gap_start, "not a gap end"
        minute = gap_start
        while minute < gap_end and not expr.matches(minute):
            minute += MINUTE
        assert minute < gap_end, "no matched wall time in the gap"

    if expr.fixed:
        walls = [wall(r, tz) for r in got]
        assert len(set(walls)) == len(walls), "a wall time ran twice"


@SLOW_PROPERTY
@settings(max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_equals_reference_daemon_under_each_dst_policy(data: st.DataObject) -> None:
    """Each gap and fold policy (or one of them left to the default) against the reference daemon."""
    zone, start, end = data.draw(windows())
    tz = ZoneInfo(zone)
    expr = data.draw(expressions(day=wall(start + timedelta(days=1), tz).date()))
    gap = data.draw(st.sampled_from([None, *GAPS]))
    fold = data.draw(st.sampled_from([None, *FOLDS]))
    schedule = CronSchedule(expr.text, zone, gap=gap, fold=fold)
    after = start + timedelta(seconds=data.draw(st.integers(0, 59)), microseconds=data.draw(st.integers(0, 999)))
    got = engine(schedule, after, end)
    expected = [r for r in reference(expr, zone, start, end, gap, fold) if r > after]
    assert got == expected, (expr.text, zone, after, gap, fold)
    assert all(a < b for a, b in itertools.pairwise(got))
    if schedule.fold != "both":
        walls = [wall(r, tz) for r in got]
        assert len(set(walls)) == len(walls), "a wall time ran twice"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ZONES), st.integers(1990, 2037), st.data())
def test_runs_chain_equals_single_steps(zone: str, year: int, data: st.DataObject) -> None:
    """runs() is next_after() applied repeatedly, strictly increasing, for any start instant."""
    expr = data.draw(expressions())
    schedule = CronSchedule(expr.text, zone)
    after = datetime(year, 1, 1, tzinfo=UTC) + timedelta(seconds=data.draw(st.integers(0, 366 * 86400)))
    got = schedule.runs(after, 20)
    assert len(got) == 20
    assert got[0] > after
    assert all(a < b for a, b in itertools.pairwise(got))
    for previous, current in itertools.pairwise(got):
        assert schedule.next_after(previous) == current
        assert schedule.next_after(previous - timedelta(microseconds=1)) == previous
