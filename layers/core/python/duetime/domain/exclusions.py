"""Excluded dates of a job: local calendar days (in the job's zone) on which its slots are skipped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

MAX_EXCLUSIONS = 366
# "2026-12-25" or an inclusive range "2026-12-24/2026-12-26" (ISO 8601's interval separator).
_ENTRY = re.compile(r"(?P<first>[0-9]{4}-[0-9]{2}-[0-9]{2})(?:/(?P<last>[0-9]{4}-[0-9]{2}-[0-9]{2}))?")


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


class Exclusions:
    """The dates a job skips, read in its time zone: a slot is excluded when its local date is listed."""

    def __init__(self, entries: Sequence[str], time_zone: str) -> None:
        self.ranges = tuple(parse_exclusion(entry) for entry in entries)
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
        # Local midnight after the range; one in a DST gap resolves to the gap's end (fold=0 offset).
        midnight = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=self.zone)
        return midnight.astimezone(UTC) - timedelta(microseconds=1)
