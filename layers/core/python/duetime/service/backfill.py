"""Backfill: run every slot of a job's schedule in a past range once, recorded as kind `backfill`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.definitions import MAX_BACKFILL_SLOTS
from duetime.domain.errors import Conflict, InvalidInput
from duetime.domain.exclusions import Exclusions
from duetime.domain.horizon import HORIZON_RULE, within_horizon
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus, Overlap, Schedule, to_ms
from duetime.domain.quotas import BACKFILL_SLOTS_PER_HOUR, HOUR_WINDOW_SECONDS, rate_window
from duetime.domain.recurrence import Recurrence, recurrence_of
from duetime.service.calendars import CalendarCache
from duetime.service.context import Ports
from duetime.service.dispatch import EXCLUDED, last_bound, new_execution
from duetime.service.handlers import check_grant
from duetime.service.jobs import first_slot, get_owned_job
from duetime.service.ports import DueMessage

# The policies a backfill may ask for: `replace` would cancel live runs of the schedule, never wanted here.
BACKFILL_OVERLAPS = (Overlap.ALLOW, Overlap.FORBID)
# Rows created per store call: one SQLite transaction, or that many conditional puts on DynamoDB.
PUT_BATCH = 100


@dataclass(frozen=True)
class BackfillResult:
    """What one backfill request did: runs created, slots whose execution existed already (ran, waiting or
    backfilled before: left as they are), excluded slots recorded as skipped, and the range's first and last
    slot (None when the range holds none)."""

    created: int
    present: int
    skipped: int
    first_slot: datetime | None
    last_slot: datetime | None
    overlap: Overlap


def backfill(
    ports: Ports,
    owner: str,
    job_id: str,
    start: datetime,
    end: datetime,
    overlap: Overlap = Overlap.FORBID,
    groups: Sequence[str] = (),
) -> BackfillResult:
    """Create one execution of kind `backfill` for each slot of the job's schedule in [start, end) and send
    it to run at once, as docs/schedules.md's "Backfill" says.

    A slot's execution id derives from the job and the slot, and its row is keyed where the slot's live run
    would be (due at the slot plus the job's spread, already past): a slot whose execution exists, by id
    anywhere in the job's history or by key (a concurrent request, the live chain), is counted `present` and
    not touched, so a second identical request creates nothing. Slots outside startAt/endAt, or after the
    maxRuns-th, are not slots;
    a slot on an excluded date is recorded skipped (`excluded`) and not run. At most MAX_BACKFILL_SLOTS slots
    per request (400 naming `to` beyond). `overlap`: `forbid` runs them one at a time, never beside another
    running run of the job; `allow` lets them run together and beside the live schedule. The owner or the
    caller's current `groups` must be granted the job's handler (Forbidden naming `handler`).
    """
    job = get_owned_job(ports, owner, job_id)
    check_grant(ports, owner, groups, job.handler)
    if overlap not in BACKFILL_OVERLAPS:
        raise InvalidInput("a backfill's overlap is allow or forbid", field="overlap")
    if job.status != JobStatus.ACTIVE:
        raise Conflict(f"job is {job.status.value}; only an active job can be backfilled", field="status")
    recurrence = recurrence_of(job.schedule, job.created_at)
    if recurrence is None:
        raise Conflict("a one-off (at) job has no schedule to backfill", field="schedule")
    now = ports.clock()
    # Before any slot is worked out: a slot outside the horizon has no execution id (years 1970..2286).
    for name, value in (("from", start), ("to", end)):
        if not within_horizon(value):
            raise InvalidInput(f"`{name}` is out of range: {HORIZON_RULE}", field=name)
    if start >= end:
        raise InvalidInput("`to` must be after `from`", field="to")
    if end > now:
        raise InvalidInput("`to` must not be in the future: a backfill runs past slots only", field="to")
    slots = slots_between(recurrence, job.schedule, start, end)
    last = _last_numbered_slot(ports, job, recurrence, now)
    if last is not None:
        slots = [slot for slot in slots if slot <= last]
    if not slots:
        return BackfillResult(0, 0, 0, None, None, overlap)
    exclusions = Exclusions(job.exclude, job.schedule.time_zone, CalendarCache(ports).of(job)) if job.exclude else None
    present_ids = ports.store.execution_ids_between(job.job_id, to_ms(slots[0]), to_ms(slots[-1]) + 1)
    rows = [_row(job, slot, overlap, exclusions, now) for slot in slots]
    new_rows = [row for row in rows if row.execution_id not in present_ids]
    count_backfilled_slots(ports, owner, sum(1 for row in new_rows if row.status == ExecutionStatus.SCHEDULED), now)
    created: list[Execution] = []
    for first in range(0, len(new_rows), PUT_BATCH):
        created.extend(ports.store.put_executions(new_rows[first : first + PUT_BATCH]))
    runs = [e for e in created if e.status == ExecutionStatus.SCHEDULED]
    if runs:
        ports.queues.send([DueMessage.for_execution(e, ports.store.key_of(e)) for e in runs], now)
    return BackfillResult(
        created=len(runs),
        present=len(rows) - len(created),
        skipped=len(created) - len(runs),
        first_slot=slots[0],
        last_slot=slots[-1],
        overlap=overlap,
    )


def count_backfilled_slots(ports: Ports, owner: str, runs: int, now: datetime) -> None:
    """Count the `runs` a backfill is about to create against the owner's backfillSlotsPerHour, before any is
    written: QuotaExceeded (429, Retry-After: the next hour) if this hour cannot take them all, InvalidInput
    naming `to` if no hour could (the range must be backfilled in parts)."""
    limit = ports.quotas.backfill_slots_per_hour
    if limit is None or runs == 0:
        return
    if runs > limit:
        raise InvalidInput(
            f"the range holds {runs} slots to run, more than the owner's {BACKFILL_SLOTS_PER_HOUR} of {limit}; "
            "backfill it in parts",
            field="to",
        )
    window = rate_window(owner, BACKFILL_SLOTS_PER_HOUR, limit, now, amount=runs, seconds=HOUR_WINDOW_SECONDS)
    ports.store.count_request(window)


def slots_between(recurrence: Recurrence, schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's slots in [start, end) within its startAt/endAt bounds, excluded dates included; raises
    InvalidInput(field="to") past MAX_BACKFILL_SLOTS of them."""
    if schedule.start_at is not None:
        start = max(start, schedule.start_at)
    if schedule.end_at is not None:
        end = min(end, schedule.end_at + timedelta(microseconds=1))  # endAt itself is a slot of the schedule
    slots: list[datetime] = []
    slot = recurrence.next_after(start - timedelta(microseconds=1))
    while slot < end:
        if len(slots) == MAX_BACKFILL_SLOTS:
            raise InvalidInput(
                f"the range holds more than {MAX_BACKFILL_SLOTS} slots of the schedule; backfill it in parts"
                f" (the first {MAX_BACKFILL_SLOTS} end before {slot.isoformat()})",
                field="to",
            )
        slots.append(slot)
        slot = recurrence.next_after(slot)
    return slots


def _last_numbered_slot(ports: Ports, job: Job, recurrence: Recurrence, now: datetime) -> datetime | None:
    """The slot numbered maxRuns, if the schedule has one and it is past (None: every slot up to now is within
    the bounds): slots after it are not the schedule's, as those after endAt are not (the simulation, seed 9101
    with every flag: a backfill ran six slots of a maxRuns 1 job past its one). Counted from the open row of the
    job's chain with the highest run number (one read, for a maxRuns job only), else from the first slot; the walk
    is at most MAX_SCAN slots, as a catch-up plan's (dispatch.last_bound)."""
    if job.schedule.max_runs is None:
        return None
    numbered = [e for e in ports.store.open_executions_of_job(job.job_id) if e.run_number is not None]
    if numbered:
        anchor = max(numbered, key=lambda e: e.run_number or 0)
    else:
        anchor = new_execution(job, first_slot(job.schedule, job.created_at), run_number=1)
    return last_bound(job, anchor, recurrence, now)


def _row(job: Job, slot: datetime, overlap: Overlap, exclusions: Exclusions | None, now: datetime) -> Execution:
    """The backfill row of `slot`: a run waiting to be sent, or, on an excluded date, a skip record."""
    row = new_execution(job, slot, kind="backfill")
    if exclusions is not None and exclusions.excludes(slot):
        return row.model_copy(
            update={
                "status": ExecutionStatus.SKIPPED,
                "skip_reason": EXCLUDED,
                "skipped_count": 1,
                "finished_at": now,
            }
        )
    return row.model_copy(update={"overlap": overlap})
