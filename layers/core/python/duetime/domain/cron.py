"""Cron schedules in IANA time zones, computed in local wall time and returned in UTC.

The engine is self-contained (no croniter): it parses the 5 fields into sets, walks the matching
local wall-clock minutes in calendar order (skipping whole months, days and hours that cannot match),
and resolves each wall time with zoneinfo and ``fold``:

* a wall time that exists once runs at that instant;
* a wall time inside a DST gap (it does not exist) runs, for a fixed-time schedule, at the instant the
  gap ends (so several matched times in one gap, and the first time after the gap, are one run);
  other schedules do not run it;
* a wall time inside a DST overlap (it happens twice) runs, for a fixed-time schedule, once at its
  first occurrence (fold=0); other schedules run it at both instants.

A schedule is fixed-time when neither its minute nor its hour field starts with ``*`` (Vixie cron,
cronie). Day-of-month and day-of-week are OR-ed when neither field starts with ``*``; otherwise both
must match (so a plain ``*`` leaves only the other field restricting), exactly as in Vixie cron.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime.domain.errors import InvalidSchedule

CRON_FIELD = "schedule.cron"

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

# One list element: `*`, `*/step`, `a`, `a-b`, `a/step` (a to the field's maximum), `a-b/step`,
# where a and b are ASCII numbers or (month, day-of-week) 3-letter names.
_ELEMENT = re.compile(
    r"(?:(?P<star>\*)|(?P<lo>[0-9]{1,9}|[A-Za-z]{3})(?:-(?P<hi>[0-9]{1,9}|[A-Za-z]{3}))?)"
    r"(?:/(?P<step>[0-9]{1,9}))?"
)
# ASCII whitespace only: str.split() would also accept exotic Unicode separators.
_SEPARATORS = re.compile(r"[ \t]+")

_MAX_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def load_zone(time_zone: str, field: str = "schedule.timeZone") -> ZoneInfo:
    """The ZoneInfo for an IANA name; raises InvalidSchedule naming `field` if unknown."""
    if not isinstance(time_zone, str) or not time_zone:
        raise InvalidSchedule(f"unknown time zone {time_zone!r}", field=field)
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


class CronSchedule:
    """A 5-field cron expression evaluated in one time zone."""

    def __init__(self, expression: str, time_zone: str = "UTC") -> None:
        self.expression = expression
        self.time_zone = time_zone
        self.zone = load_zone(time_zone)
        if not isinstance(expression, str):
            raise InvalidSchedule(f"invalid cron expression {expression!r}", field=CRON_FIELD)
        text = expression.strip(" \t\r\n")
        text = _MACROS.get(text.lower(), text)
        fields = _SEPARATORS.split(text) if text else []
        if len(fields) != 5:
            raise _invalid(expression, f"expected 5 fields, got {len(fields)}")
        minute, hour, dom, month, dow = fields
        self.minutes = _parse_field(minute, 0, 59, None, "minute", expression)
        self.hours = _parse_field(hour, 0, 23, None, "hour", expression)
        self.days = _parse_field(dom, 1, 31, None, "day-of-month", expression)
        self.months = _parse_field(month, 1, 12, _MONTH_NAMES, "month", expression)
        weekdays = _parse_field(dow, 0, 7, _DOW_NAMES, "day-of-week", expression)
        self.weekdays = frozenset(d % 7 for d in weekdays)  # 0 and 7 are Sunday
        # Vixie cron: a field whose text starts with `*` is "starred" (even `*/2`).
        self._dom_star = dom.startswith("*")
        self._dow_star = dow.startswith("*")
        self._fixed = not (minute.startswith("*") or hour.startswith("*"))
        self._minute_list = sorted(self.minutes)
        self._hour_list = sorted(self.hours)
        self._month_list = sorted(self.months)
        # With both day fields required (AND), a day-of-month no listed month has can never run (every
        # existing month-day falls on every weekday over the years). With OR, day-of-week always can.
        and_days = self._dom_star or self._dow_star
        if and_days and all(min(self.days) > _MAX_DAYS_IN_MONTH[m - 1] for m in self.months):
            raise _invalid(expression, "no listed month has that day of the month, so it never runs")

    # ----------------------------------------------------------------------------------------------
    # Public interface

    @property
    def is_fixed_time(self) -> bool:
        """Neither the minute nor the hour field starts with `*` (DST gaps and overlaps run once)."""
        return self._fixed

    def matches(self, wall: datetime) -> bool:
        """Whether a local wall-clock time (its minute; seconds ignored) matches the expression."""
        return (
            wall.minute in self.minutes
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
        in_dom = day.day in self.days
        in_dow = day.isoweekday() % 7 in self.weekdays
        if self._dom_star or self._dow_star:
            return in_dom and in_dow
        return in_dom or in_dow

    def _month_days(self, year: int, month: int) -> tuple[int, ...]:
        return _matching_days(year, month, self.days, self.weekdays, self._dom_star or self._dow_star)

    def _next_wall(self, start: datetime, limit_year: int) -> datetime | None:
        """The first matching wall-clock minute at or after `start` (naive), or None past limit_year."""
        year, month, day = start.year, start.month, start.day
        hour, minute = start.hour, start.minute
        if start.second or start.microsecond:
            minute += 1
        while year <= limit_year:
            if month not in self.months:
                i = bisect_left(self._month_list, month)
                if i == len(self._month_list):
                    year, month = year + 1, self._month_list[0]
                else:
                    month = self._month_list[i]
                day, hour, minute = 1, 0, 0
                continue
            days = self._month_days(year, month)
            i = bisect_left(days, day)
            if i == len(days):
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                day, hour, minute = 1, 0, 0
                continue
            if days[i] != day:
                day, hour, minute = days[i], 0, 0
            if minute > 59:
                hour, minute = hour + 1, 0
            i = bisect_left(self._hour_list, hour)
            if i == len(self._hour_list):
                day, hour, minute = day + 1, 0, 0
                continue
            if self._hour_list[i] != hour:
                hour, minute = self._hour_list[i], 0
            i = bisect_left(self._minute_list, minute)
            if i == len(self._minute_list):
                hour, minute = hour + 1, 0
                if hour > 23:
                    day, hour = day + 1, 0
                continue
            return datetime(year, month, day, hour, self._minute_list[i])
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
        # that follows the real clock, the first matched one is a candidate too.
        second: datetime | None = None
        off0, off1 = _offsets(wall, zone)
        in_first_occurrence = off0 > off1 and local.fold == 0
        if in_first_occurrence and not self._fixed:
            change = _transition(after.replace(microsecond=0), after + (off0 - off1), off0, zone)
            overlap_start = (change + off1).replace(tzinfo=None)  # first wall time after the change
            repeated = self._next_wall(overlap_start, limit_year)
            if repeated is not None and repeated < overlap_start + (off0 - off1):
                second = (repeated - off1).replace(tzinfo=UTC)

        # Walk the matched wall times from `after`'s own. Instants grow with wall time except inside
        # an overlap, where every first occurrence precedes every second one. So the first matched
        # wall time with an instant after `after` gives the next run; when `after` is itself a first
        # occurrence, second occurrences are left to `second` (the earliest of them).
        wall = wall.replace(second=0, microsecond=0)
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
                if self._fixed or in_first_occurrence:
                    instants = [first]
                else:
                    instants = [first, (candidate - off1).replace(tzinfo=UTC)]
            elif self._fixed:  # skipped by a gap: runs when the gap ends
                instants = [_transition((candidate - off1).replace(tzinfo=UTC), candidate - off0, off0, zone)]
            else:  # skipped by a gap: not run
                instants = []
            later = [instant for instant in instants if instant > after]
            if later:
                return min(later) if second is None else min(*later, second)
            wall = candidate + timedelta(minutes=1)


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
def _matching_days(
    year: int, month: int, days: frozenset[int], weekdays: frozenset[int], both: bool
) -> tuple[int, ...]:
    """The days of a month that match day-of-month and day-of-week (AND if `both`, else OR)."""
    first_weekday, length = calendar.monthrange(year, month)  # Monday is 0
    out: list[int] = []
    for day in range(1, length + 1):
        weekday = (first_weekday + day) % 7  # Sunday is 0
        in_dom = day in days
        in_dow = weekday in weekdays
        if (in_dom and in_dow) if both else (in_dom or in_dow):
            out.append(day)
    return tuple(out)
