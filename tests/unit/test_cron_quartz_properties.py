"""Property tests of Quartz day elements (L, L-n, nW, LW, d#k, dL) against the brute-force cron daemon.

The reference daemon of test_cron_properties ticks once per UTC minute over the tz database; here its
day matcher is written apart from the engine: it lists the dates of the month and picks the last, the
nearest Monday-Friday by distance, or counts earlier same weekdays, where the engine uses arithmetic on
a month's length and first weekday.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from duetime.domain.cron import CronSchedule
from duetime.domain.errors import InvalidSchedule
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.unit.test_cron_properties import (
    DAYS,
    MONTHS,
    SLOW_EXAMPLES,
    SLOW_PROPERTY,
    Expr,
    Field,
    engine,
    fields,
    reference,
    wall,
    windows,
)


# The reference's day rules are pure functions of a token and a date, asked once a minute of every window:
# each answer is kept (functools.cache).
@cache
def month_dates(day: date) -> tuple[date, ...]:
    first = day.replace(day=1)
    return tuple(d for d in (first + timedelta(days=i) for i in range(31)) if d.month == day.month)


@cache
def quartz_dom_matches(token: str, day: date) -> bool:
    dates = month_dates(day)
    weekdays = [d for d in dates if d.weekday() < 5]
    if token == "LW":
        return day == weekdays[-1]
    if token.startswith("L"):
        back = int(token[2:]) if token.startswith("L-") else 0
        return back < len(dates) and day == dates[-1 - back]
    target = int(token[:-1])  # nW
    if target > len(dates):
        return False
    nearest = min(weekdays, key=lambda d: abs(d.day - target))
    return day == nearest


@cache
def quartz_dow_matches(token: str, day: date) -> bool:
    if "#" in token:
        name, k = token.split("#")
        wanted = DAYS.index(name.upper()) if name.isalpha() else int(name) % 7
        same = [d for d in month_dates(day) if d.isoweekday() % 7 == wanted and d <= day]
        return day.isoweekday() % 7 == wanted and len(same) == int(k)
    name = token[:-1]  # dL
    wanted = DAYS.index(name.upper()) if name.isalpha() else int(name) % 7
    return day.isoweekday() % 7 == wanted and (day + timedelta(days=7)).month != day.month


@dataclass(frozen=True)
class QuartzExpr(Expr):
    """An expression whose day fields are plain values (dom/dow) plus Quartz elements."""

    dom_quartz: tuple[str, ...] = ()
    dow_quartz: tuple[str, ...] = ()

    def _day_text(self, plain: Field, quartz: tuple[str, ...]) -> str:
        return ",".join(([plain.text] if plain.values else []) + list(quartz))

    @property
    def text(self) -> str:
        days = (self._day_text(self.dom, self.dom_quartz), self.month.text, self._day_text(self.dow, self.dow_quartz))
        return " ".join((self.minute.text, self.hour.text, *days))

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minute.values or wall.hour not in self.hour.values:
            return False
        if wall.month not in self.month.values:
            return False
        day = wall.date()
        in_dom = day.day in self.dom.values or any(quartz_dom_matches(t, day) for t in self.dom_quartz)
        in_dow = day.isoweekday() % 7 in {d % 7 for d in self.dow.values} or any(
            quartz_dow_matches(t, day) for t in self.dow_quartz
        )
        dom_text, dow_text = self._day_text(self.dom, self.dom_quartz), self._day_text(self.dow, self.dow_quartz)
        if dom_text.startswith(("*", "?")) or dow_text.startswith(("*", "?")):
            return in_dom and in_dow
        return in_dom or in_dow


NONE = Field("", frozenset())


@st.composite
def quartz_expressions(draw: st.DrawFn, day: date) -> QuartzExpr:
    """Minute/hour as in the plain tests; day fields with Quartz elements, often aimed at `day`."""
    minute = draw(fields(0, 59, hot=[0, 15, 30, 45, 59]))
    hour = draw(fields(0, 23, hot=[0, 1, 2, 3, 22, 23]))
    month = draw(
        st.one_of(
            st.just(Field("*", frozenset(range(1, 13)))),
            st.just(Field(str(day.month), frozenset({day.month}))),
            fields(1, 12, MONTHS),
        )
    )
    length = len(month_dates(day))
    weekday = day.isoweekday() % 7
    aimed_dom = [
        f"L-{length - day.day}",
        "L",
        "LW",
        f"{day.day}W",
        f"{max(1, day.day - 1)}W",
        f"{min(31, day.day + 1)}W",
    ]
    dom_token = st.one_of(
        st.sampled_from(aimed_dom),
        st.just("L"),
        st.just("LW"),
        st.integers(0, 30).map(lambda n: f"L-{n}"),
        st.integers(1, 31).map(lambda n: f"{n}W"),
    )
    name = st.sampled_from([str(weekday), DAYS[weekday], DAYS[weekday].lower(), str(weekday or 7)])
    any_name = st.one_of(st.integers(0, 7).map(str), st.sampled_from(DAYS))
    dow_token = st.one_of(
        name.map(lambda n: f"{n}#{(day.day - 1) // 7 + 1}"),
        name.map(lambda n: f"{n}L"),
        st.tuples(any_name, st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
        any_name.map(lambda n: f"{n}L"),
    )
    plain_kind = st.sampled_from(["none", "none", "star", "question", "values"])

    def day_field(kind: str, low: int, high: int, names: list[str] | None) -> Field:
        if kind == "none":
            return NONE
        if kind == "star":
            return Field("*", frozenset(range(low, high + 1)))
        if kind == "question":
            return Field("?", frozenset(range(low, high + 1)))
        return draw(fields(low, high, names))

    dom_kind, dow_kind = draw(plain_kind), draw(plain_kind)
    dom = day_field(dom_kind, 1, 31, None)
    dow = day_field(dow_kind, 0, 7, DAYS)
    # `?` stands alone; a field with nothing plain needs a Quartz element.
    dom_quartz = (
        () if dom.text == "?" else tuple(draw(st.lists(dom_token, min_size=0 if dom.values else 1, max_size=2)))
    )
    dow_quartz = (
        () if dow.text == "?" else tuple(draw(st.lists(dow_token, min_size=0 if dow.values else 1, max_size=2)))
    )
    if draw(st.booleans()):
        dow, dow_quartz = Field("*", frozenset(range(0, 8))), ()  # the common shape: Quartz in one field only
    return QuartzExpr(minute, hour, dom, month, dow, dom_quartz, dow_quartz)


def never_matches(expr: QuartzExpr) -> bool:
    """Brute force over a 28-year cycle with leap years (every month's weekday layout occurs)."""
    start = date(1996, 1, 1)
    noon = datetime(1996, 1, 1, min(expr.hour.values), min(expr.minute.values))
    for offset in range(28 * 366):
        day = start + timedelta(days=offset)
        if expr.matches(noon.replace(year=day.year, month=day.month, day=day.day)):
            return False
    return True


@SLOW_PROPERTY
@settings(max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_quartz_days_equal_reference_daemon(data: st.DataObject) -> None:
    zone, start, end = data.draw(windows())
    tz = ZoneInfo(zone)
    expr = data.draw(quartz_expressions(wall(start + timedelta(days=1), tz).date()))
    try:
        schedule = CronSchedule(expr.text, zone)
    except InvalidSchedule:
        assert never_matches(expr), f"{expr.text!r} was refused but runs"
        assume(False)
        raise
    assert schedule.is_fixed_time == expr.fixed
    after = start + timedelta(seconds=data.draw(st.integers(0, 59)))
    got = engine(schedule, after, end)
    expected = [r for r in reference(expr, zone, start, end) if r > after]
    assert got == expected, (expr.text, zone, after)
    assert all(a < b for a, b in itertools.pairwise(got))


@settings(max_examples=150, deadline=None)
@given(st.integers(1990, 2037), st.integers(1, 12), st.data())
def test_quartz_days_over_a_year_in_utc(year: int, month: int, data: st.DataObject) -> None:
    """Over months rather than days: a year of daily runs equals the reference's dates."""
    expr = data.draw(quartz_expressions(date(year, month, 1) + timedelta(days=data.draw(st.integers(0, 27)))))
    expr = QuartzExpr(
        Field("0", frozenset({0})),
        Field("12", frozenset({12})),
        expr.dom,
        expr.month,
        expr.dow,
        expr.dom_quartz,
        expr.dow_quartz,
    )
    try:
        schedule = CronSchedule(expr.text, "UTC")
    except InvalidSchedule:
        assert never_matches(expr)
        return
    start = datetime(year, 1, 1, tzinfo=UTC)
    got = [r.date() for r in engine(schedule, start, start + timedelta(days=366))]
    expected = [
        d
        for d in (date(year, 1, 1) + timedelta(days=i) for i in range(366))
        if expr.matches(datetime(d.year, d.month, d.day, 12)) and d.year == year
    ]
    assert [d for d in got if d.year == year] == expected, expr.text


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected_local"),
    [
        # Second Sunday of March is the US spring-forward day: 02:30 does not exist, fixed-time runs at 03:00.
        ("30 2 ? 3 0#2", "America/New_York", "2026-01-01T00:00:00+00:00", "2026-03-08T03:00-04:00"),
        # Last Sunday of October: Europe/London falls back; 01:30 happens twice and runs once (first).
        ("30 1 ? * SUNL", "Europe/London", "2026-10-20T00:00:00+00:00", "2026-10-25T01:30+01:00"),
        # Lord Howe shifts by 30 minutes on the first Sunday of April (02:00 -> 01:30).
        ("45 1 ? 4 SUN#1", "Australia/Lord_Howe", "2026-03-01T00:00:00+00:00", "2026-04-05T01:45+11:00"),
        # St John's (UTC-3:30): the last weekday of the month.
        ("0 9 LW * *", "America/St_Johns", "2026-01-01T00:00:00+00:00", "2026-01-30T09:00-03:30"),
        ("0 9 L-2 2 *", "America/Santiago", "2028-01-01T00:00:00+00:00", "2028-02-27T09:00-03:00"),
        ("0 9 1W * *", "UTC", "2026-02-01T00:00:00+00:00", "2026-02-02T09:00+00:00"),
        ("0 9 31W * *", "UTC", "2026-05-01T00:00:00+00:00", "2026-05-29T09:00+00:00"),  # Sunday 31st
    ],
)
def test_quartz_examples(expression: str, zone: str, after: str, expected_local: str) -> None:
    got = CronSchedule(expression, zone).next_after(datetime.fromisoformat(after))
    assert got == datetime.fromisoformat(expected_local)
