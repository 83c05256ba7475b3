"""Which missed slots of a repeating schedule run and which are skipped, by catch-up policy and deadline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime.domain.models import CatchUp, to_ms
from duetime.domain.recurrence import Recurrence

# A slot is "missed" once it is this late: a run a few seconds behind (a slow pre-load) is just late.
MISSED_AFTER = timedelta(seconds=60)
# Bounded work: never walk more slots than this, never start more catch-up runs than this.
MAX_SCAN = 100_000
MAX_CATCH_UP_RUNS = 100
# `all` is refused for a schedule whose slots can be closer than this (a seconds cron, `every` under 5 s):
# catch-up runs go one after another, each waiting for a moment when no run of its job is live and looking
# again a third of a lease later, so behind a job's own runs every second or two its backlog never drains.
MIN_CATCH_UP_ALL_PERIOD_SECONDS = 5


@dataclass(frozen=True)
class CatchUpPlan:
    """Slots to run now, how many missed slots are skipped (and why), and the first future slot."""

    run_slots: list[datetime] = field(default_factory=list)
    skipped_count: int = 0
    skip_reason: str | None = None
    next_slot: datetime | None = None
    first_skipped: datetime | None = None


def plan_catch_up(
    schedule: Recurrence,
    first_slot: datetime,
    now: datetime,
    policy: CatchUp,
    starting_deadline_seconds: int | None,
    excluded: Callable[[datetime], bool] | None = None,
    last_slot: datetime | None = None,
) -> CatchUpPlan | None:
    """Plan what to do with a cron chain whose waiting slot `first_slot` may have been missed.

    Returns None when `first_slot` is not missed (it simply runs). Otherwise walks the slots from
    `first_slot` up to `now` (at most MAX_SCAN of them) and returns the plan: `latest` runs the most
    recent one, `all` runs each in order (at most MAX_CATCH_UP_RUNS, the oldest beyond that skipped),
    `none` skips them all; any slot older than the starting deadline is skipped too. A slot `excluded`
    (on an excluded date) never runs: it is counted with the skipped ones of this plan. No slot after
    `last_slot` (a bounded schedule's end) is walked: the plan's next slot is then past the bounds.
    """
    if now - first_slot < MISSED_AFTER:
        return None
    missed: list[datetime] = []
    count = 0
    slot = first_slot
    limit = now if last_slot is None else min(now, last_slot)
    while slot <= limit and count < MAX_SCAN:
        count += 1
        if excluded is None or not excluded(slot):
            missed.append(slot)
        if len(missed) > MAX_CATCH_UP_RUNS:
            missed.pop(0)
        slot = schedule.next_after(slot)
    while slot <= limit:  # more than MAX_SCAN missed: jump ahead by the clock, bounded
        slot = schedule.next_after(limit)
    deadline = timedelta(seconds=starting_deadline_seconds) if starting_deadline_seconds else None

    def in_time(s: datetime) -> bool:
        return deadline is None or now - s <= deadline

    if policy == CatchUp.NONE:
        runs: list[datetime] = []
        reason = "catch-up none"
    elif policy == CatchUp.LATEST:
        runs = [missed[-1]] if missed and in_time(missed[-1]) else []
        reason = "catch-up latest" if runs else "starting deadline"
    else:
        runs = [s for s in missed if in_time(s)]
        reason = "catch-up all: too many missed" if count > len(runs) else "starting deadline"
    skipped = count - len(runs)
    return CatchUpPlan(
        run_slots=runs,
        skipped_count=skipped,
        skip_reason=reason if skipped else None,
        next_slot=slot,
        first_skipped=first_slot if skipped else None,
    )


def plan_before(plan: CatchUpPlan, schedule: Recurrence, first_slot: datetime, cut: datetime) -> CatchUpPlan:
    """The part of `plan` for the slots from `first_slot` up to `cut` (not included): a later slot whose row was
    planned on its own (queued just before an outage, say), whose dispatch plans the slots from there. A slot
    of the part runs if `plan` runs it; the others are skipped with the plan's reason. Walks at most MAX_SCAN
    slots, as the plan did. Slots are stored to the millisecond: one either way is the same slot."""
    end_ms = to_ms(cut) - 1
    count = 0
    slot = first_slot
    while to_ms(slot) < end_ms and count < MAX_SCAN:
        count += 1
        slot = schedule.next_after(slot)
    runs = [s for s in plan.run_slots if to_ms(s) < end_ms]
    skipped = count - len(runs)
    return CatchUpPlan(
        run_slots=runs,
        skipped_count=skipped,
        skip_reason=plan.skip_reason if skipped else None,
        next_slot=cut,
        first_skipped=first_slot if skipped else None,
    )
