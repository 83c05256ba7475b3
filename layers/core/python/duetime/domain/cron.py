"""Cron schedules in IANA time zones, computed in local wall time and returned in UTC.

The engine is self-contained (no croniter): it parses the 5 fields (or 6, seconds first, as Quartz and
Spring order them) into sets, walks the matching local wall-clock times in calendar order (skipping whole
months, days, hours and minutes that cannot match), and resolves each wall time with zoneinfo and ``fold``:

* a wall time that exists once runs at that instant;
* a wall time inside a DST gap (it does not exist) runs, for a fixed-time schedule, at the instant the
  gap ends (so several matched times in one gap, and the first time after the gap, are one run);
  other schedules do not run it;
* a wall time inside a DST overlap (it happens twice) runs, for a fixed-time schedule, once at its
  first occurrence (fold=0); other schedules run it at both instants.

A schedule is fixed-time when neither its minute nor its hour field starts with ``*`` (Vixie cron,
cronie), nor its seconds field when it has one (``* 30 2 * * *`` runs every second of 02:30: it follows the
real clock as ``* 2 * * *`` does). A five-field expression is a six-field one whose seconds field is ``0``.
A schedule's DST policy (``gap``: ``shift`` or ``skip``; ``fold``: ``first``, ``last`` or ``both``)
replaces that default when given: ``shift``/``skip`` run a gap's matched times at the gap's end or not at
all, ``first``/``last``/``both`` run a repeated wall time at its first, its second or both occurrences.

Day-of-month and day-of-week are OR-ed when neither field starts with ``*``; otherwise both must match
(so a plain ``*`` leaves only the other field restricting), exactly as in Vixie cron.

The day fields also take Quartz's calendar elements, alone or in a list with plain ones: day-of-month
``L`` (the last day), ``L-n`` (n days before it), ``nW`` (the weekday nearest day n, never leaving the
month), ``LW`` (the last weekday); day-of-week ``d#k`` (the k-th weekday d of the month) and ``dL`` (the
last weekday d). ``?`` in a day field is ``*``. They only choose local dates: the time of day and the
DST rules above are unchanged. docs/schedules.md is the user's description.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache, lru_cache
from importlib.resources import files
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime.domain.errors import InvalidSchedule

CRON_FIELD = "schedule.cron"

# A schedule's DST policy (the API's `schedule.dst`): what a matched wall time in a gap and in a fold does.
Gap = Literal["shift", "skip"]
Fold = Literal["first", "last", "both"]
GAPS: tuple[Gap, ...] = ("shift", "skip")
FOLDS: tuple[Fold, ...] = ("first", "last", "both")

# How far ahead next_after looks before it gives up (bounded work). Satisfiable expressions need at
# most 40 years: Feb 29 on one weekday (e.g. `0 0 29 2 */7`, AND-ed days) across the skipped leap
# year 2100; plain Feb 29 needs 8. Unsatisfiable day fields are rejected at construction.
HORIZON_YEARS = 50

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1
    )
}
_DOW_NAMES = {name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# A six-field expression: a seconds field (0-59) before the five of cron.
SECONDS_FIELDS = 6

# One list element: `*`, `*/step`, `a`, `a-b`, `a/step` (a to the field's maximum), `a-b/step`,
# where a and b are ASCII numbers or (month, day-of-week) 3-letter names.
_ELEMENT = re.compile(
    r"(?:(?P<star>\*)|(?P<lo>[0-9]{1,9}|[A-Za-z]{3})(?:-(?P<hi>[0-9]{1,9}|[A-Za-z]{3}))?)"
    r"(?:/(?P<step>[0-9]{1,9}))?"
)
# ASCII whitespace only: str.split() would also accept exotic Unicode separators.
_SEPARATORS = re.compile(r"[ \t]+")

# The lengths a month can have (February: 28 or 29).
_MONTH_LENGTHS = ((31,), (28, 29), (31,), (30,), (31,), (30,), (31,), (31,), (30,), (31,), (30,), (31,))


# Names the host's zone database holds but IANA does not define for a place: what they mean depends on the
# host (`localtime` is the machine's own zone, `posixrules` its default DST rules), or nothing (`Factory`).
_NOT_PLACES = frozenset({"localtime", "posixrules", "Factory"})


@cache
def iana_zone_names() -> frozenset[str]:
    """The IANA zone names, from the pinned tzdata package, so every host accepts the same names."""
    listed = files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return frozenset(listed) - _NOT_PLACES


def load_zone(time_zone: str, field: str = "schedule.timeZone") -> ZoneInfo:
    """The ZoneInfo for an IANA name; raises InvalidSchedule naming `field` if unknown."""
    if not isinstance(time_zone, str) or time_zone not in iana_zone_names():
        raise InvalidSchedule(f"unknown time zone {time_zone!r} (an IANA name such as Europe/Paris)", field=field)
    try:
        return ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError, OSError, UnicodeError) as exc:
        # OSError: a directory such as "America", or a name too long for the file system.
        raise InvalidSchedule(f"unknown time zone {time_zone!r}", field=field) from exc


def _invalid(expression: str, reason: str) -> InvalidSchedule:
    return InvalidSchedule(f"invalid cron expression {expression!r}: {reason}", field=CRON_FIELD)


def _parse_field(
    text: str, low: int, high: int, names: dict[str, int] | None, label: str, expression: str
) -> frozenset[int]:
    values: set[int] = set()

    def number(token: str) -> int:
        if token.isdigit():  # the regex guarantees ASCII digits
            value = int(token)
        elif names is not None and token.upper() in names:
            value = names[token.upper()]
        else:
            raise _invalid(expression, f"{label}: {token!r} is not a valid value")
        if not low <= value <= high:
            raise _invalid(expression, f"{label}: {value} is outside {low}-{high}")
        return value

    for element in text.split(","):
        match = _ELEMENT.fullmatch(element)
        if match is None:
            raise _invalid(expression, f"{label}: cannot parse {element!r}")
        if match["star"]:
            first, last = low, high
        else:
            first = number(match["lo"])
            if match["hi"] is not None:
                last = number(match["hi"])
            elif match["step"] is not None:
                last = high
            else:
                last = first
        if first > last:
            raise _invalid(expression, f"{label}: range {element!r} is reversed")
        step = 1
        if match["step"] is not None:
            step = int(match["step"])
            if step < 1:
                raise _invalid(expression, f"{label}: step must be at least 1")
        values.update(range(first, last + 1, step))
    return frozenset(values)


# Quartz day elements: `L`, `L-n`, `nW`, `LW` (day-of-month); `d#k`, `dL` (day-of-week).
_DOM_SPECIAL = re.compile(r"(?:L(?:-(?P<offset>[0-9]{1,9}))?|(?P<near>[0-9]{1,9})W|(?P<lastweekday>LW))", re.IGNORECASE)
_DOW_SPECIAL = re.compile(r"(?P<day>[0-9]{1,9}|[A-Za-z]{3})(?:#(?P<nth>[0-9]{1,9})|(?P<last>L))", re.IGNORECASE)


@dataclass(frozen=True)
class DaySpec:
    """What the two day fields select, resolved month by month (hashable, so month results are cached).

    `days`/`weekdays` are the plain values; `last_offsets` are the n of `L-n` (0 for `L`), `nearest` the
    n of `nW`, `last_weekday` is `LW`; `nth` holds (weekday, k) of `d#k`, `last_of` the d of `dL`.
    `both`: day-of-month and day-of-week must both match (one of them starts with `*`).
    """

    days: frozenset[int]
    weekdays: frozenset[int]
    both: bool
    last_offsets: frozenset[int] = frozenset()
    nearest: frozenset[int] = frozenset()
    last_weekday: bool = False
    nth: frozenset[tuple[int, int]] = frozenset()
    last_of: frozenset[int] = frozenset()


def _split_day_field(
    text: str, special: re.Pattern[str], label: str, expression: str
) -> tuple[str, list[re.Match[str]]]:
    """The plain part of a day field (elements joined by commas, "" if none) and its Quartz elements."""
    plain: list[str] = []
    found: list[re.Match[str]] = []
    for element in text.split(","):
        match = special.fullmatch(element)
        if match is not None:
            found.append(match)
        elif label == "day-of-week" and element.upper() == "L":
            raise _invalid(expression, f"{label}: 'L' alone is ambiguous; write dL, e.g. 5L for the last Friday")
        else:
            plain.append(element)
    return ",".join(plain), found


def _parse_day_fields(dom: str, dow: str, expression: str) -> DaySpec:
    """Both day fields: plain values (as Vixie cron) plus Quartz elements; `?` is `*`."""
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else dow
    dom_plain, dom_special = _split_day_field(dom, _DOM_SPECIAL, "day-of-month", expression)
    dow_plain, dow_special = _split_day_field(dow, _DOW_SPECIAL, "day-of-week", expression)
    days = _parse_field(dom_plain, 1, 31, None, "day-of-month", expression) if dom_plain else frozenset()
    weekdays = _parse_field(dow_plain, 0, 7, _DOW_NAMES, "day-of-week", expression) if dow_plain else frozenset()
    last_offsets: set[int] = set()
    nearest: set[int] = set()
    last_weekday = False
    for match in dom_special:
        if match["lastweekday"]:
            last_weekday = True
        elif match["near"] is not None:
            day = int(match["near"])
            if not 1 <= day <= 31:
                raise _invalid(expression, f"day-of-month: {match[0]!r}: the day must be 1-31")
            nearest.add(day)
        else:
            offset = int(match["offset"] or 0)
            if offset > 30:
                raise _invalid(expression, f"day-of-month: {match[0]!r}: L-n needs n of 0-30 (a month has 31 days)")
            last_offsets.add(offset)
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    for match in dow_special:
        token = match["day"]
        if token.isdigit():
            weekday = int(token)
            if not 0 <= weekday <= 7:
                raise _invalid(expression, f"day-of-week: {match[0]!r}: the weekday must be 0-7 (0 and 7 are Sunday)")
        elif token.upper() in _DOW_NAMES:
            weekday = _DOW_NAMES[token.upper()]
        else:
            raise _invalid(expression, f"day-of-week: {token!r} is not a valid value")
        weekday %= 7
        if match["nth"] is not None:
            k = int(match["nth"])
            if not 1 <= k <= 5:
                raise _invalid(
                    expression, f"day-of-week: {match[0]!r}: d#k needs k of 1-5 (a month has 5 weeks at most)"
                )
            nth.add((weekday, k))
        else:
            last_of.add(weekday)
    return DaySpec(
        days=days,
        weekdays=frozenset(d % 7 for d in weekdays),
        both=dom.startswith("*") or dow.startswith("*"),
        last_offsets=frozenset(last_offsets),
        nearest=frozenset(nearest),
        last_weekday=last_weekday,
        nth=frozenset(nth),
        last_of=frozenset(last_of),
    )


class CronSchedule:
    """A 5-field cron expression (6 with seconds first) evaluated in one time zone, under a DST policy
    (default: by its kind)."""

    def __init__(
        self, expression: str, time_zone: str = "UTC", gap: Gap | None = None, fold: Fold | None = None
    ) -> None:
        self.expression = expression
        self.time_zone = time_zone
        self.zone = load_zone(time_zone)
        if not isinstance(expression, str):
            raise InvalidSchedule(f"invalid cron expression {expression!r}", field=CRON_FIELD)
        text = expression.strip(" \t\r\n")
        text = _MACROS.get(text.lower(), text)
        fields = _SEPARATORS.split(text) if text else []
        if len(fields) not in (5, SECONDS_FIELDS):
            raise _invalid(expression, f"expected 5 fields (or 6, seconds first), got {len(fields)}")
        # Seconds first (Quartz, Spring); five fields are exactly cron's, each run at second 0 of its minute.
        self.has_seconds = len(fields) == SECONDS_FIELDS
        second = fields.pop(0) if self.has_seconds else "0"
        minute, hour, dom, month, dow = fields
        self.seconds = _parse_field(second, 0, 59, None, "second", expression)
        self.minutes = _parse_field(minute, 0, 59, None, "minute", expression)
        self.hours = _parse_field(hour, 0, 23, None, "hour", expression)
        self.months = _parse_field(month, 1, 12, _MONTH_NAMES, "month", expression)
        # Vixie cron: a field whose text starts with `*` is "starred" (even `*/2`); `?` counts as `*`.
        self._day_spec = _parse_day_fields(dom, dow, expression)
        self.days = self._day_spec.days
        self.weekdays = self._day_spec.weekdays  # 0 and 7 are Sunday
        self._fixed = not (second.startswith("*") or minute.startswith("*") or hour.startswith("*"))
        # Vixie cron's rule unless the schedule chose: fixed-time shifts a gap and runs a fold once, first.
        self.gap: Gap = gap or ("shift" if self._fixed else "skip")
        self.fold: Fold = fold or ("first" if self._fixed else "both")
        self._second_list = sorted(self.seconds)
        self._minute_list = sorted(self.minutes)
        self._hour_list = sorted(self.hours)
        self._month_list = sorted(self.months)
        # A month's matching days depend only on its length and first weekday, and every listed month has
        # each possible (length, first weekday) within the horizon: if none gives a day, it never runs.
        if not any(
            _days_of_month(length, first, self._day_spec)
            for m in self.months
            for length in _MONTH_LENGTHS[m - 1]
            for first in range(7)
        ):
            raise _invalid(expression, "no listed month has a day that the day fields select, so it never runs")

    # ----------------------------------------------------------------------------------------------
    # Public interface

    @property
    def is_fixed_time(self) -> bool:
        """Neither the seconds, the minute nor the hour field starts with `*` (by default DST gaps and overlaps
        run once)."""
        return self._fixed

    def matches(self, wall: datetime) -> bool:
        """Whether a local wall-clock time (to the second; microseconds ignored) matches the expression."""
        return (
            wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self._day_matches(wall.date())
        )

    def next_after(self, after: datetime) -> datetime:
        """The first run strictly after `after` (aware), in UTC."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("next_after needs a timezone-aware datetime")
        after = after.astimezone(UTC)
        try:
            found = self._next_after(after)
        except OverflowError:
            found = None
        if found is None:
            raise InvalidSchedule(
                f"cron expression {self.expression!r} has no run in {self.time_zone} within"
                f" {HORIZON_YEARS} years after {after.isoformat()}",
                field=CRON_FIELD,
            )
        return found

    def runs(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` runs strictly after `after`, in UTC, each computed from the previous one."""
        out: list[datetime] = []
        current = after
        for _ in range(count):
            current = self.next_after(current)
            out.append(current)
        return out

    # ----------------------------------------------------------------------------------------------
    # Calendar (time-zone free)

    def _day_matches(self, day: date) -> bool:
        return day.day in self._month_days(day.year, day.month)

    def _month_days(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)  # Monday is 0
        return _days_of_month(length, (first_weekday + 1) % 7, self._day_spec)

    def _next_wall(self, start: datetime, limit_year: int) -> datetime | None:
        """The first matching wall-clock second at or after `start` (naive), or None past limit_year."""
        year, month, day = start.year, start.month, start.day
        hour, minute, second = start.hour, start.minute, start.second
        if start.microsecond:
            second += 1
        while year <= limit_year:
            if month not in self.months:
                i = bisect_left(self._month_list, month)
                if i == len(self._month_list):
                    year, month = year + 1, self._month_list[0]
                else:
                    month = self._month_list[i]
                day, hour, minute, second = 1, 0, 0, 0
                continue
            days = self._month_days(year, month)
            i = bisect_left(days, day)
            if i == len(days):
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                day, hour, minute, second = 1, 0, 0, 0
                continue
            if days[i] != day:
                day, hour, minute, second = days[i], 0, 0, 0
            if second > 59:
                minute, second = minute + 1, 0
            if minute > 59:
                hour, minute, second = hour + 1, 0, 0
            i = bisect_left(self._hour_list, hour)
            if i == len(self._hour_list):
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if self._hour_list[i] != hour:
                hour, minute, second = self._hour_list[i], 0, 0
            i = bisect_left(self._minute_list, minute)
            if i == len(self._minute_list):
                hour, minute, second = hour + 1, 0, 0
                if hour > 23:
                    day, hour = day + 1, 0
                continue
            if self._minute_list[i] != minute:
                minute, second = self._minute_list[i], 0
            i = bisect_left(self._second_list, second)
            if i == len(self._second_list):
                minute, second = minute + 1, 0  # past 59: the next hour, at the top of the loop
                continue
            return datetime(year, month, day, hour, minute, self._second_list[i])
        return None

    # ----------------------------------------------------------------------------------------------
    # Time zone resolution

    def _next_after(self, after: datetime) -> datetime | None:
        zone = self.zone
        limit_year = min(after.year + HORIZON_YEARS, 9999)
        local = after.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)

        # `after` is the first occurrence of a repeated wall time: the second occurrences of the
        # repeated wall times, from the start of the overlap, are still ahead of it. For a schedule
        # that runs a fold's second occurrences (fold `last` or `both`), the first matched one is a
        # candidate too.
        second: datetime | None = None
        off0, off1 = _offsets(wall, zone)
        in_first_occurrence = off0 > off1 and local.fold == 0
        if in_first_occurrence and self.fold != "first":
            change = _transition(after.replace(microsecond=0), after + (off0 - off1), off0, zone)
            overlap_start = (change + off1).replace(tzinfo=None)  # first wall time after the change
            repeated = self._next_wall(overlap_start, limit_year)
            if repeated is not None and repeated < overlap_start + (off0 - off1):
                second = (repeated - off1).replace(tzinfo=UTC)

        # Walk the matched wall times from `after`'s own. Instants grow with wall time except inside
        # an overlap, where every first occurrence precedes every second one. So the first matched
        # wall time with an instant after `after` gives the next run; when `after` is itself a first
        # occurrence, second occurrences are left to `second` (the earliest of them).
        wall = wall.replace(microsecond=0)
        while True:
            candidate = self._next_wall(wall, limit_year)
            if candidate is None:
                return second
            off0, off1 = _offsets(candidate, zone)
            instants: list[datetime]
            if off0 == off1:  # exists once
                instants = [(candidate - off0).replace(tzinfo=UTC)]
            elif off0 > off1:  # repeated: fold=0 is the first (earlier) occurrence
                first = (candidate - off0).replace(tzinfo=UTC)
                last = (candidate - off1).replace(tzinfo=UTC)
                # From a first occurrence, `second` holds the earliest second occurrence of this overlap:
                # one here is no earlier, so `last` may keep it (a later overlap's must be kept).
                if self.fold == "first":
                    instants = [first]
                elif self.fold == "last":
                    instants = [last]
                else:
                    instants = [first] if in_first_occurrence else [first, last]
            else:  # skipped by a gap: runs when the gap ends (shift) or not at all (skip)
                gap_end = _transition((candidate - off1).replace(tzinfo=UTC), candidate - off0, off0, zone)
                if self.gap == "skip":
                    # The walk goes on from the first wall time after the gap (not second by second through it).
                    wall = max(candidate + timedelta(seconds=1), (gap_end + off1).replace(tzinfo=None))
                    continue
                instants = [gap_end]
            later = [instant for instant in instants if instant > after]
            if later:
                return min(later) if second is None else min(*later, second)
            wall = candidate + timedelta(seconds=1)


def _offsets(wall: datetime, zone: ZoneInfo) -> tuple[timedelta, timedelta]:
    """UTC offsets of a naive wall time with fold=0 and fold=1 (different in a gap or an overlap)."""
    off0 = wall.replace(tzinfo=zone, fold=0).utcoffset()
    off1 = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert off0 is not None and off1 is not None
    return off0, off1


def _transition(low: datetime, high: datetime, before: timedelta, zone: ZoneInfo) -> datetime:
    """The first whole second in (low, high] whose UTC offset is no longer `before` (bisection).

    `low` (aware UTC) still has offset `before`; `high` (naive or aware, read as UTC) no longer has.
    For a gap containing wall time w between offsets p < o, the change lies in (w - o, w - p].
    """
    high = high.replace(tzinfo=UTC)
    if high.microsecond:
        high = high.replace(microsecond=0) + timedelta(seconds=1)
    low = low.replace(microsecond=0)
    while high - low > timedelta(seconds=1):
        mid = (low + (high - low) / 2).replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    return high


@lru_cache(maxsize=4096)
def _days_of_month(length: int, first: int, spec: DaySpec) -> tuple[int, ...]:
    """The days of a month of `length` days starting on weekday `first` (Sunday is 0) that the day fields
    select: day-of-month and day-of-week each give a set of days, AND-ed if `spec.both`, else OR-ed."""

    def weekday(day: int) -> int:
        return (first + day - 1) % 7

    by_dom = {day for day in spec.days if day <= length}
    by_dom.update(length - offset for offset in spec.last_offsets if length - offset >= 1)
    for day in spec.nearest:
        if day <= length:
            by_dom.add(_nearest_weekday(day, length, weekday(day)))
    if spec.last_weekday:
        by_dom.add(_nearest_weekday(length, length, weekday(length)))
    by_dow = {day for day in range(1, length + 1) if weekday(day) in spec.weekdays}
    for wanted, k in spec.nth:
        day = 1 + (wanted - first) % 7 + 7 * (k - 1)
        if day <= length:
            by_dow.add(day)
    for wanted in spec.last_of:
        by_dow.add(length - (weekday(length) - wanted) % 7)
    return tuple(sorted(by_dom & by_dow if spec.both else by_dom | by_dow))


def _nearest_weekday(day: int, length: int, weekday: int) -> int:
    """Quartz `W`: the Monday-Friday day nearest `day` in its month (Saturday -> Friday, Sunday -> Monday,
    except where that leaves the month: Saturday the 1st -> Monday the 3rd, Sunday the last -> Friday)."""
    if weekday == 6:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday
        return day + 1 if day < length else day - 2
    return day
