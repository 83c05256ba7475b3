"""Where a job's plain runs are without an index entry: their keys follow from the timings the job has had.

On DynamoDB a plain run (a slot's first attempt of the schedule, due at its slot's spread) is written without
the attribute the byJob index is keyed by, which saves the index's write unit on every such run (issue 32). Its
row is still found: its key follows from the job id, the slot and the spread the job had then (its due time and
so its due hour and shard). History, find-by-id and a job's open rows read the keys of the job's slots, merged
with byJob's entries, which every other row keeps (a run-now, a retry moved to a later due, a backfilled or
caught-up slot, a row due anywhere but its spread, and every row written before).

A job's slots are those of the timing it had at the time: an edit that changes its schedule or spread keeps the
timing it replaces (a Timing, in a record of the job's own) for the history of its runs. A reader walks a job's
slots down from a bound above every plain row's (newest_reach); a plain run planned further ahead (after excluded
dates, say) keeps its entry (within_reach, which the writer asks).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from duetime.domain.models import Execution, Job, JobStatus, Schedule, from_ms, to_ms
from duetime.domain.recurrence import Recurrence, recurrence_of
from duetime.domain.spread import spread_due

# A page of history reads at most this many slots' keys before it answers (with a cursor when there is more):
# a job paused for long, or whose slots fell in excluded dates, has slots without rows.
MOST_SLOTS_A_PAGE = 500
# A job's timings record keeps at most this many timings its edits replaced (the oldest go first), and none
# whose rows have all expired (historyRetentionDays after its end).
MOST_TIMINGS = 200
# The most slots one enumeration walks, whatever the range (a guard: ranges come from the store's callers).
MOST_SLOTS = 100_000
# How far back the window of a newest-first walk starts (it doubles until it holds what was asked).
FIRST_WINDOW = timedelta(minutes=1)
# A replaced timing still names the rows a pre-loader that read the job before the edit may write after it:
# those of its next slots after the edit plus this (the pre-load window and its slack are less).
REACH_AFTER_EDIT = timedelta(hours=1)
# A pre-loader sends the runs due within its window of its own now: its clock may be ahead of the reader's and
# its run slow (the dispatch horizon's slack is 5 s): a row's slot is within this much more of the window.
REACH_SLACK = timedelta(minutes=1)
# A writer that read a job before it was paused, completed or cancelled writes its rows within this of that
# change (a pre-loader's cycle: its shard lease is a minute).
STALE_WRITE = timedelta(minutes=5)


def is_plain(execution: Execution, jitter_seconds: int) -> bool:
    """Whether `execution` is a plain run of its schedule under a spread of `jitter_seconds`: its key follows
    from its job, its slot and that spread, so it needs no byJob entry."""
    return (
        execution.kind == "scheduled"
        and execution.attempt == 0
        and execution.due_at == spread_due(execution.job_id, execution.scheduled_at, jitter_seconds)
    )


@dataclass(frozen=True)
class Timing:
    """The schedule and spread a job's plain runs had for slots in [start, end): the job's own (end and edited_at
    None), or one an edit replaced at `edited_at`, whose slots run to a reach past the edit (replaced)."""

    schedule: Schedule
    jitter_seconds: int
    anchor: datetime  # the job's creation: an interval without startAt counts from it
    start: datetime
    end: datetime | None = None
    edited_at: datetime | None = None

    @classmethod
    def current(cls, job: Job, past: list[Timing]) -> Timing:
        """The timing `job` has now: from its last edit that replaced one (`past`), or from its creation."""
        start = max((t.edited_at for t in past if t.edited_at is not None), default=job.created_at)
        return cls(job.schedule, job.jitter_seconds, job.created_at, start)

    @cached_property
    def recurrence(self) -> Recurrence | None:
        return recurrence_of(self.schedule, self.anchor)

    def slots(self, low: datetime, high: datetime, most: int = MOST_SLOTS) -> list[datetime]:
        """This timing's slots in [low, high) and in its own span, earliest first (at most `most`). A one-off's
        one slot is its own whatever the span (it may be earlier than the job: `at` may be in the past)."""
        recurrence = self.recurrence
        if recurrence is None:
            at = self.schedule.at
            return [at] if at is not None and low <= at < high else []
        low = max(low, self.start, self.schedule.start_at or low)  # no slot before startAt, nor after endAt
        high = high if self.end is None else min(high, self.end)
        if self.schedule.end_at is not None:
            high = min(high, self.schedule.end_at + timedelta(milliseconds=1))
        if low >= high:
            return []
        found: list[datetime] = []
        try:
            slot = recurrence.next_after(low - timedelta(milliseconds=1))
            while slot < high and len(found) < most:
                found.append(slot)
                slot = recurrence.next_after(slot)
        except OverflowError:  # past year 9999: no slot there
            pass
        return found

    @property
    def first_possible(self) -> datetime:
        """No slot of this timing is earlier: its start, or a one-off's slot."""
        at = self.schedule.at
        return self.start if at is None else min(at, self.start)

    def past_second_slot(self, edge: datetime) -> datetime:
        """Just after this timing's second slot from `edge` on (just after `edge` when it has none there): a sent
        run's follower is the one row beyond a point a writer planned to."""
        later = self.slots(edge, _LAST, most=2)
        return (later[-1] if later else edge) + timedelta(milliseconds=1)

    def replaced(self, edited: datetime) -> Timing:
        """This timing as an edit at `edited` leaves it: its slots to its second slot from REACH_AFTER_EDIT on."""
        end = self.past_second_slot(edited + REACH_AFTER_EDIT)
        return Timing(self.schedule, self.jitter_seconds, self.anchor, self.start, end, edited)

    def to_record(self) -> dict[str, Any]:
        """A replaced timing as its entry in the job's timings record."""
        assert self.end is not None and self.edited_at is not None, "only a replaced timing is stored"
        return {
            "schedule": self.schedule.model_dump_json(by_alias=True, exclude_none=True),
            "jitterSeconds": self.jitter_seconds,
            "anchorMs": to_ms(self.anchor),
            "startMs": to_ms(self.start),
            "endMs": to_ms(self.end),
            "editedMs": to_ms(self.edited_at),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Timing:
        return cls(
            schedule=Schedule.model_validate_json(record["schedule"]),
            jitter_seconds=int(record["jitterSeconds"]),
            anchor=from_ms(int(record["anchorMs"])),
            start=from_ms(int(record["startMs"])),
            end=from_ms(int(record["endMs"])),
            edited_at=from_ms(int(record["editedMs"])),
        )


# Above every slot: the end of a walk that stops at a count.
_LAST = datetime.max.replace(tzinfo=UTC)


def timings_kept(timings: list[Timing], edited: Job, now: datetime, retention: timedelta) -> list[Timing] | None:
    """The replaced timings a job's record keeps after `edited` is stored at `now`, from `timings` (the job's
    own last): None when the edit keeps the timing (schedule and spread) its plain runs follow."""
    current = timings[-1]
    if current.schedule == edited.schedule and current.jitter_seconds == edited.jitter_seconds:
        return None
    kept = [t for t in timings[:-1] if t.end is not None and t.end + retention > now]
    return [*kept[-(MOST_TIMINGS - 1) :], current.replaced(now)]


def slots_between(timings: list[Timing], low: datetime, high: datetime, most: int = MOST_SLOTS) -> list[datetime]:
    """Every slot of `timings` in [low, high), earliest first, each once (two timings may share a slot)."""
    found: set[datetime] = set()
    for timing in timings:
        found.update(timing.slots(low, high, most))
    return sorted(found)[:most]


def slots_before(timings: list[Timing], high: datetime, count: int) -> tuple[list[datetime], datetime | None]:
    """The newest `count` slots of `timings` before `high`, newest first, and the bound they reach down to:
    every slot in [bound, high) is among them. The bound is None when no timing has a slot below it."""
    floor = min(t.first_possible for t in timings)
    window = FIRST_WINDOW
    while True:
        low = floor if high - floor <= window else high - window
        found = slots_between(timings, low, high)
        if len(found) >= count:
            newest = found[-count:]
            return newest[::-1], newest[0]
        if low <= floor:
            return found[::-1], None
        window *= 2


def slots_after(timings: list[Timing], low: datetime, high: datetime, count: int) -> tuple[list[datetime], bool]:
    """The earliest `count` slots of `timings` in [low, high), earliest first, and whether more slots follow
    before `high`."""
    found = slots_between(timings, low, high, most=count + 1)
    return found[:count], len(found) > count


def within_reach(job: Job, slot: datetime, now: datetime, window: timedelta) -> bool:
    """Whether a plain run of `job` in `slot`, written at `now`, goes without a byJob entry: its slot is at most
    the job's second slot after the pre-loader's window and REACH_SLACK (a sent run's follower is the one row
    beyond the window), so a reader finds it below newest_reach. A run planned further ahead (past excluded
    dates, say) keeps its entry."""
    edge = now + window + REACH_SLACK
    # The common case first, without walking the schedule.
    return slot <= edge or slot < Timing.current(job, []).past_second_slot(edge)


def newest_reach(job: Job, timings: list[Timing], now: datetime, window: timedelta) -> datetime:
    """A bound above every slot of a plain run of `job` written by now (within_reach), and of every timing an
    edit replaced. A job that is not active is counted from its last change and STALE_WRITE (a writer that read
    it before writes no later), so its history does not start with empty slots up to today."""
    seen = now if job.status == JobStatus.ACTIVE else min(now, job.updated_at + STALE_WRITE)
    reach = Timing.current(job, []).past_second_slot(seen + window + REACH_SLACK)
    return max([reach, *(t.end for t in timings if t.end is not None)])
