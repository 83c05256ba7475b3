"""A repeating schedule's bounds: startAt, endAt and maxRuns decide which slots exist and which is the last.

Runs are counted without a counter: each execution of a bounded schedule carries its slot's number
(`runNumber`), and the next slot's row is written with the number after it, in the write dispatch makes
anyway. Every slot from the first counts, whether it runs or is skipped (overlap, catch-up, a starting
deadline), except a slot on an excluded date, which the schedule never had.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.domain.models import Execution, Job, Schedule
from duetime.domain.recurrence import Recurrence


def first_bounded_slot(recurrence: Recurrence, schedule: Schedule, now: datetime) -> datetime:
    """The first slot after `now` not before `startAt` (an interval's startAt is its anchor already)."""
    if schedule.cron is not None and schedule.start_at is not None and schedule.start_at > now:
        return recurrence.next_after(schedule.start_at - timedelta(microseconds=1))
    return recurrence.next_after(now)


def within_bounds(schedule: Schedule, slot: datetime, run_number: int | None) -> bool:
    """Whether the slot numbered `run_number` (None: not counted) is one the schedule runs."""
    if schedule.end_at is not None and slot > schedule.end_at:
        return False
    return schedule.max_runs is None or run_number is None or run_number <= schedule.max_runs


def first_run_number(schedule: Schedule) -> int | None:
    """The first slot's number: counted only for a bounded schedule (so the end of a run knows, from its
    row alone, whether it may be the last and the job must be read)."""
    return 1 if schedule.is_bounded else None


def following_number(execution: Execution, slots_walked: int = 1) -> int | None:
    """The number of the slot `slots_walked` after `execution`'s (None: not counted)."""
    return None if execution.run_number is None else execution.run_number + slots_walked


def is_last_slot(job: Job, execution: Execution, recurrence: Recurrence | None) -> bool:
    """Whether `execution` holds its bounded schedule's last slot: its number is maxRuns, or the next slot
    falls after endAt. A run-now or an unbounded schedule's run never is."""
    schedule = job.schedule
    if recurrence is None or not schedule.is_bounded or execution.kind == "manual":
        return False
    if schedule.max_runs is not None and execution.run_number is not None and execution.run_number >= schedule.max_runs:
        return True
    return schedule.end_at is not None and recurrence.next_after(execution.scheduled_at) > schedule.end_at
