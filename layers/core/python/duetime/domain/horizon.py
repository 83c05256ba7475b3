"""The horizon: the span of dates duetime plans within, and that every date a user gives must fall in.

A schedule's `startAt` and `endAt`, a one-off `at` (a year either side of now, tighter still), an `exclude`
entry or a calendar's date, and a backfill's `from` and `to` are refused (400 naming the field) outside
years FIRST_YEAR..LAST_YEAR. Planning never looks for a slot past LATEST: a schedule whose every later slot
is excluded up to there has no slot left (a preview shows none; dispatch pauses the job, saying why), where
an unbounded search would run into the end of Python's calendar (year 9999) and fail.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

FIRST_YEAR = 2000
LAST_YEAR = 2200
EARLIEST = datetime(FIRST_YEAR, 1, 1, tzinfo=UTC)
LATEST = datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC) - timedelta(microseconds=1)
EARLIEST_DATE = EARLIEST.date()
LATEST_DATE = LATEST.date()
HORIZON_RULE = f"duetime plans between {EARLIEST_DATE.isoformat()} and {LATEST_DATE.isoformat()}"


def within_horizon(instant: datetime) -> bool:
    return EARLIEST <= instant <= LATEST


def check_instant(instant: datetime, name: str) -> None:
    """ValueError naming `name` (for the caller's 400) if `instant` lies outside the horizon."""
    if not within_horizon(instant):
        raise ValueError(f"{name} {instant.isoformat()} is out of range: {HORIZON_RULE}")


def check_dates(first: date, last: date, text: str) -> None:
    """ValueError if the local dates `first`..`last` (the entry `text`) reach outside the horizon."""
    if first < EARLIEST_DATE or last > LATEST_DATE:
        raise ValueError(f"{text[:80]!r} is out of range: {HORIZON_RULE}")
