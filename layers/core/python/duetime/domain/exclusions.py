"""Excluded dates of a job: local calendar days (in the job's zone) on which its slots are skipped, listed
inline or in named calendars of its owner (`calendar:<name>` entries)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from duetime.domain.horizon import check_dates

MAX_EXCLUSIONS = 366
# "2026-12-25" or an inclusive range "2026-12-24/2026-12-26" (ISO 8601's interval separator).
_ENTRY = re.compile(r"(?P<first>[0-9]{4}-[0-9]{2}-[0-9]{2})(?:/(?P<last>[0-9]{4}-[0-9]{2}-[0-9]{2}))?")
# An `exclude` entry naming one of the owner's calendars: "calendar:holidays-de".
CALENDAR_PREFIX = "calendar:"
CALENDAR_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
CALENDAR_NAME_RULE = "1-64 of a-z, 0-9, '-' and '_', starting with a letter or digit"


@dataclass(frozen=True)
class Calendar:
    """A named list of dates and ranges (the `exclude` entry syntax) that an owner's jobs may exclude."""

    name: str
    dates: tuple[str, ...]
    updated_ms: int


def check_calendar_name(name: str) -> str:
    """`name` if it can name a calendar; ValueError saying why otherwise."""
    if not CALENDAR_NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a calendar name ({CALENDAR_NAME_RULE})")
    return name


def calendar_reference(entry: str) -> str | None:
    """The calendar an `exclude` entry names ("calendar:<name>"), or None for a date or range."""
    return entry.removeprefix(CALENDAR_PREFIX) if entry.startswith(CALENDAR_PREFIX) else None


def calendars_named(entries: Sequence[str]) -> list[str]:
    """The calendar names among `exclude` entries, in order, without repeats."""
    return list(dict.fromkeys(name for name in map(calendar_reference, entries) if name is not None))


def check_exclude_entry(entry: str) -> None:
    """An inline date/range or a well-formed calendar reference; ValueError saying why otherwise."""
    name = calendar_reference(entry)
    if name is None:
        parse_exclusion(entry)
    else:
        check_calendar_name(name)


@dataclass(frozen=True)
class DateRange:
    """Inclusive local dates."""

    first: date
    last: date


def parse_exclusion(text: str) -> DateRange:
    """One `exclude` entry; ValueError saying why (pydantic reports it against `exclude`)."""
    match = _ENTRY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is neither a date YYYY-MM-DD nor a range YYYY-MM-DD/YYYY-MM-DD")
    try:
        first = date.fromisoformat(match["first"])
        last = date.fromisoformat(match["last"]) if match["last"] else first
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a calendar date") from exc
    if last < first:
        raise ValueError(f"{text!r}: the range ends before it starts")
    return DateRange(first, last)


def parse_bounded_exclusion(text: str) -> DateRange:
    """An entry a request gives (a job's `exclude`, a calendar's dates): parsed, and within the horizon
    (domain/horizon.py). Stored entries are read with parse_exclusion, so one written before the bound
    still loads; planning stops at the horizon all the same."""
    entry = parse_exclusion(text)
    check_dates(entry.first, entry.last, text)
    return entry


def check_bounded_entries(entries: Sequence[str]) -> None:
    """Each inline date or range of a request's `exclude` within the horizon; ValueError otherwise."""
    for entry in entries:
        if calendar_reference(entry) is None:
            parse_bounded_exclusion(entry)


class Exclusions:
    """The dates a job skips, read in its time zone: a slot is excluded when its local date is listed."""

    def __init__(self, entries: Sequence[str], time_zone: str, calendars: Mapping[str, Calendar] | None = None) -> None:
        """`calendars` are the owner's, by name, as read when planning; a `calendar:` entry naming none of
        them (deleted while the job referred to it, or not read: the claim's late-slot check) adds no dates."""
        known = calendars or {}
        dates: list[str] = []
        for entry in entries:
            name = calendar_reference(entry)
            if name is None:
                dates.append(entry)
            elif name in known:
                dates.extend(known[name].dates)
        self.ranges = tuple(parse_exclusion(entry) for entry in dates)
        self.zone = ZoneInfo(time_zone)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def excludes(self, slot: datetime) -> bool:
        local = slot.astimezone(self.zone).date()
        return any(r.first <= local <= r.last for r in self.ranges)

    def end_of_exclusion(self, slot: datetime) -> datetime:
        """The last instant (UTC) of the excluded local day(s) around an excluded `slot`: the next slot
        after it is the first one not on those days (unless another range follows at once)."""
        local = slot.astimezone(self.zone).date()
        last = max(r.last for r in self.ranges if r.first <= local <= r.last)
        # A range up to date.max (stored before the horizon bound) raises OverflowError here: the caller,
        # recurrence.next_included, takes it as "no slot left".
        # Local midnight after the range; one in a DST gap resolves to the gap's end (fold=0 offset).
        midnight = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=self.zone)
        return midnight.astimezone(UTC) - timedelta(microseconds=1)
