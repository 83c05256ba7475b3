"""The one "next slot" of a repeating schedule (cron or interval), used by submit, dispatch and preview."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from duetime.domain.cron import CronSchedule
from duetime.domain.exclusions import Exclusions
from duetime.domain.horizon import LATEST
from duetime.domain.interval import IntervalSchedule
from duetime.domain.models import Schedule


class Recurrence(Protocol):
    """A repeating schedule: its slots strictly after an instant, in UTC."""

    def next_after(self, after: datetime) -> datetime: ...

    def runs(self, after: datetime, count: int) -> list[datetime]: ...


def recurrence_of(schedule: Schedule, created_at: datetime | None = None) -> Recurrence | None:
    """The repeating schedule of `schedule`, or None for a one-off `at`.

    An interval without `startAt` is anchored at `created_at` (a stored job always has its anchor set).
    """
    if schedule.cron is not None:
        dst = schedule.dst
        return CronSchedule(
            schedule.cron, schedule.time_zone, gap=dst.gap if dst else None, fold=dst.fold if dst else None
        )
    if schedule.every is not None:
        anchor = schedule.start_at or created_at
        if anchor is None:
            raise ValueError("an interval schedule needs startAt or the job's creation time")
        return IntervalSchedule(schedule.every, anchor)
    return None


# How far a stored slot may sit from the schedule's instant and still be that slot: rows keep milliseconds
# (rounded), and slots are at least a second apart (MIN_INTERVAL, cron's seconds field).
SLOT_TOLERANCE = timedelta(milliseconds=1)
# The skip reason of a row planned under the schedule a job had before an edit.
SCHEDULE_EDITED = "schedule edited"


def is_slot(recurrence: Recurrence, instant: datetime) -> bool:
    """Whether `instant` is one of the schedule's slots (a row planned under an older schedule may not be)."""
    # Looking from just before the instant (not a whole second: the slot before would be found when slots are
    # a second apart and the row's milliseconds were rounded down).
    return abs(recurrence.next_after(instant - 2 * SLOT_TOLERANCE) - instant) <= SLOT_TOLERANCE


def next_included(recurrence: Recurrence, exclusions: Exclusions, after: datetime) -> datetime | None:
    """The first slot strictly after `after` that is not on an excluded date (jumping whole ranges); None
    when there is none up to the horizon's end (domain/horizon.py): every later slot is excluded."""
    try:
        slot = recurrence.next_after(after)
        while slot <= LATEST and exclusions.excludes(slot):
            slot = recurrence.next_after(exclusions.end_of_exclusion(slot))
    except OverflowError:  # a stored range reaching year 9999: nothing after it, so no slot left
        return None
    return slot if slot <= LATEST else None


def included_runs(recurrence: Recurrence, exclusions: Exclusions, after: datetime, count: int) -> list[datetime]:
    """The next `count` slots after `after` that are not excluded: what will run (previews, nextRuns).
    Fewer when the horizon comes first."""
    out: list[datetime] = []
    current = after
    for _ in range(count):
        found = next_included(recurrence, exclusions, current)
        if found is None:
            break
        out.append(found)
        current = found
    return out
