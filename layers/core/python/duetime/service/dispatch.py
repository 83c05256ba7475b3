"""Dispatch: pre-load each shard's due window into SQS, create cron's next run, apply catch-up."""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.definitions import (
    FIRST_LOOKBACK_SECONDS,
    RECONCILE_ROWS_PER_SHARD,
    RUNS_PER_MESSAGE,
    SHARD_COUNT_FIXED_AHEAD,
    SQS_BATCH_SIZE,
)
from duetime.domain.bounds import following_number, within_bounds
from duetime.domain.catchup import MAX_SCAN, CatchUpPlan, plan_before, plan_catch_up
from duetime.domain.errors import Conflict
from duetime.domain.events import JobChange
from duetime.domain.exclusions import Exclusions
from duetime.domain.horizon import LATEST_DATE
from duetime.domain.keys import due_partition, execution_id, hour_bucket, parse_execution_id, preload_record_key
from duetime.domain.models import (
    MAX_NOTE_CHARS,
    Execution,
    ExecutionStatus,
    Job,
    JobStatus,
    Overlap,
    RunKind,
    format_time,
    from_ms,
    to_ms,
)
from duetime.domain.recurrence import SCHEDULE_EDITED, Recurrence, is_slot, next_included, recurrence_of
from duetime.domain.spread import spread, spread_due
from duetime.service.calendars import CalendarCache
from duetime.service.context import Ports
from duetime.service.events import batched_events, job_changed, run_ended
from duetime.service.executions import failure_notice
from duetime.service.job_ends import auto_pause_notice, complete_schedule
from duetime.service.lateness import find_unstarted
from duetime.service.ports import DueMessage

log = logging.getLogger("duetime.preloader")

# The skip reason of a slot on one of the job's excluded dates.
EXCLUDED = "excluded"
# Where a shard's pre-loader (and its sweep) starts when it has no cursor yet (a new deployment).
FIRST_LOOKBACK = timedelta(seconds=FIRST_LOOKBACK_SECONDS)
FIRST_LOOKBACK_MS = int(FIRST_LOOKBACK.total_seconds()) * 1000
# A cycle's sweep covers at most this many times the longer of the pre-load interval and reconcile_after
# (sweep_span_ms): one interval in steady state, an outage caught up over a few cycles.
SWEEP_CYCLES_AT_MOST = 5


def new_execution(
    job: Job,
    slot: datetime,
    due_at: datetime | None = None,
    kind: RunKind = "scheduled",
    run_number: int | None = None,
    by_slot: bool = False,
) -> Execution:
    """The row of `job`'s run in `slot`: due after the job's spread (a run-now is due at once), carrying
    its slot's `run_number` when the schedule counts runs (maxRuns). `by_slot` (Ports.by_slot) marks a plain run
    its store may find by its slot's key, without a byJob entry (domain/history.py)."""
    if due_at is None:
        due_at = slot if kind == "manual" else spread_due(job.job_id, slot, job.jitter_seconds)
    return Execution(
        execution_id=execution_id(job.job_id, slot, manual=kind == "manual"),
        job_id=job.job_id,
        scheduled_at=slot,
        due_at=due_at,
        job_class=job.job_class,
        kind=kind,
        run_number=run_number,
        spread_seconds=job.jitter_seconds if by_slot and kind == "scheduled" else None,
        job_version=job.version,
    )


def planned_run(ports: Ports, job: Job, slot: datetime, run_number: int | None, now: datetime) -> Execution:
    """The plain run of `job`'s schedule in `slot`, planned at `now` (a job's first run, an edit's, a follower):
    marked to go without a byJob entry when its store may find it by its slot's key (Ports.by_slot)."""
    return new_execution(job, slot, run_number=run_number, by_slot=ports.by_slot(job, slot, now))


class NoSlotLeft(ValueError):
    """Every slot of a job's schedule up to the horizon's end is excluded: there is nothing left to plan."""


# Errors planning one job's slot that its own data causes (a date out of range, an exclusion that leaves no
# slot, a stored value that no longer parses): they would repeat every pass, so the job is paused, saying
# why. Anything else (the store or queue failing) is transient: the row is left for the reconciler.
UNPLANNABLE = (ArithmeticError, LookupError, TypeError, ValueError)


@dataclass
class DispatchReport:
    sent: int = 0
    created: int = 0
    skipped: int = 0
    cancelled: int = 0
    held: int = 0  # waiting executions of paused jobs, left for resume
    resent: int = 0  # overdue or abandoned executions the reconciler sent again
    shards: int = 0  # shards this cycle pre-loaded
    busy: int = 0  # shards another pre-loader was working on
    errors: int = 0  # shards whose cycle failed (logged; the other shards still ran)
    paused: int = 0  # jobs paused because a slot of theirs could not be planned (the note says why)
    unplanned: int = 0  # executions whose dispatch failed on the store or queue: left for the reconciler
    swept: int = 0  # rows a sweep found still open once overdue and put into the open set (sweep)

    def add(self, other: DispatchReport) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def reconcile_after(ports: Ports) -> timedelta:
    """How overdue an open execution must be before the reconciler sends it again (Settings says why)."""
    return timedelta(seconds=ports.settings.reconcile_after_seconds())


def dispatch(
    ports: Ports,
    executions: list[Execution],
    now: datetime,
    known_jobs: dict[str, Job] | None = None,
    threads: int = 1,
) -> DispatchReport:
    """Send waiting executions to their queues, doing at dispatch what the schedule asks.

    For a cron or interval execution this creates the next slot (from the scheduled time, never the clock) and, if
    that is due within the dispatch horizon, dispatches it too; a missed slot goes through the job's
    catch-up policy. Executions of cancelled jobs end `cancelled`; those of paused jobs stay waiting.
    `known_jobs` are jobs the caller has just read or written, so they are not read again. With
    `threads` > 1 the next slots are created, and the messages sent (10 to a request), that many at once.
    """
    report = DispatchReport()
    # Named calendars are read when a slot is planned, once per owner in this pass: an edit applies from
    # the next pass on, to slots not yet sent.
    calendars = CalendarCache(ports)
    known = known_jobs or {}
    unknown = [e for e in executions if e.job_id not in known]
    jobs = {**known, **(_jobs_of(ports, unknown) if unknown else {})}
    horizon = ports.dispatch_horizon(now)
    pending = deque(executions)
    to_send: list[Execution] = []
    followers: list[Execution] = []
    while pending or followers:
        if not pending:
            # The next slots found so far, created at once (each put is its own conditional write); those
            # due within the horizon are dispatched in turn.
            for created in _put_all(ports, _rowless(ports, followers, now), threads):
                report.created += 1
                if created.due_at <= horizon:
                    pending.append(created)
            followers = []
            continue
        execution = pending.popleft()
        job = jobs.get(execution.job_id)
        if job is None or job.status == JobStatus.CANCELLED:
            if ports.store.end_waiting(ports.store.key_of(execution), ExecutionStatus.CANCELLED, now):
                report.cancelled += 1
            continue
        if job.status == JobStatus.PAUSED:
            report.held += 1
            continue
        try:
            _plan(ports, execution, job, pending, to_send, followers, calendars, now, report)
        except UNPLANNABLE as exc:
            # This job's data makes its slot impossible to plan (an error that would repeat every pass): it
            # is paused, saying why, and the pass goes on with the other jobs of the shard.
            why = str(exc) if isinstance(exc, NoSlotLeft) else f"{type(exc).__name__}: {exc}"
            log.warning("planning %s failed (%s): job %s is paused", execution.execution_id, why, job.job_id)
            to_send[:] = [e for e in to_send if e.job_id != job.job_id]
            jobs[job.job_id] = pause_unplannable(ports, job, execution, now, why)
            report.paused += 1
        except Exception:
            # The store or queue failed (transient): the row stays waiting in the `open` index, where the
            # reconciler finds it overdue and dispatches it again. The other jobs still go on.
            log.exception("dispatching %s failed; the reconciler sends it again", execution.execution_id)
            report.unplanned += 1
    report.sent += _send_all(ports, [DueMessage.for_execution(e, ports.store.key_of(e)) for e in to_send], now, threads)
    return report


def _jobs_of(ports: Ports, executions: list[Execution]) -> dict[str, Job]:
    """The jobs of the executions a pass dispatches, read eventually consistently: half the read units on DynamoDB,
    a run's only read at dispatch (issue 32). Such a read may answer a job as it was a moment ago, or not at all if
    it is new. Each job is read again, strongly, unless the first read is enough:

    - it found the job, and the job is active: a paused or missing job's rows are held or ended on what a strong
      read says, so a resume or a create a moment ago is never taken for a pause or a deletion;
    - the job it found is no older than any of the rows (the version each was planned under): a row an edit wrote
      with the job's new schedule is never planned with the old one, whose slots it may not be on.

    What is left is a job changed after its rows were written, read as it was: what a strongly consistent read a
    moment before that change would have answered, and a pass stands that already (the claim reads the job again,
    strongly, before anything runs; what dispatch writes to a job is conditioned on the version it read)."""
    jobs = ports.store.get_jobs(list(dict.fromkeys(e.job_id for e in executions)), consistent=False)
    # A row written before rows carried their job's version (None) is read strongly too.
    again = {
        e.job_id
        for e in executions
        if (job := jobs.get(e.job_id)) is None
        or job.status != JobStatus.ACTIVE
        or e.job_version is None
        or job.version < e.job_version
    }
    return jobs | (ports.store.get_jobs(sorted(again)) if again else {})


def _plan(
    ports: Ports,
    execution: Execution,
    job: Job,
    pending: deque[Execution],
    to_send: list[Execution],
    followers: list[Execution],
    calendars: CalendarCache,
    now: datetime,
    report: DispatchReport,
) -> None:
    """Do at dispatch what `job`'s schedule asks for `execution` (its job active): send it or skip it, plan
    the next slot (added to `followers`), apply catch-up, complete a bounded schedule that has run out."""
    schedule = recurrence_of(job.schedule, job.created_at)
    if schedule is None or execution.kind != "scheduled" or execution.attempt > 0:
        to_send.append(execution)
        return
    if not is_slot(schedule, execution.scheduled_at):
        # Planned under the schedule the job had before an edit, by a pre-loader that read the job just
        # before it: the edit's own first slot carries the job on, so this row ends here, with no follower.
        key = ports.store.key_of(execution)
        if ports.store.end_waiting(key, ExecutionStatus.SKIPPED, now, SCHEDULE_EDITED) is not None:
            report.skipped += 1
        return
    exclusions = Exclusions(job.exclude, job.schedule.time_zone, calendars.of(job)) if job.exclude else None
    if exclusions is not None and exclusions.excludes(execution.scheduled_at):
        if job.schedule.end_at is None and next_included(schedule, exclusions, execution.scheduled_at) is None:
            # Kept waiting (not skipped): the job is paused, and its resume plans from this row again.
            raise NoSlotLeft(f"every slot from {format_time(execution.scheduled_at)} up to {LATEST_DATE} is excluded")
        count, next_slot = _excluded_run(execution, schedule, exclusions)
        # Excluded dates are not slots of the schedule: the run count goes on from this row's.
        _carry_on(ports, job, execution, next_slot, following_number(execution, 0), pending, now, report)
        _skip_excluded(ports, execution, count, now, report, job)
        return
    # Lateness is judged against when this run is due (its slot plus the job's spread), and no slot past the
    # schedule's bounds is planned.
    planned_now = now - spread(job.job_id, execution.scheduled_at, job.jitter_seconds)
    plan = plan_catch_up(
        schedule,
        execution.scheduled_at,
        planned_now,
        job.catch_up,
        job.starting_deadline_seconds,
        exclusions.excludes if exclusions is not None else None,
        last_bound(job, execution, schedule, planned_now),
    )
    if plan is None:
        # Sent to run as it is: a bounded schedule's last slot completes the job when its run ends.
        to_send.append(execution)
        next_slot = schedule.next_after(execution.scheduled_at)
        number = following_number(execution)
        if next_slot is not None and within_bounds(job.schedule, next_slot, number):
            followers.append(planned_run(ports, job, next_slot, number, now))
        return
    # Only on this rare path (a missed slot) does dispatch read: a later slot in the plan's span whose row was
    # planned before (queued just before an outage, or left by a cycle that died part way) plans the slots from
    # there itself; planning them here too would count them twice.
    cut = _planned_later(ports, job, schedule, execution, plan, pending, planned_now)
    if cut is not None:
        plan = plan_before(plan, schedule, execution.scheduled_at, cut)
    # Other waiting slots of this job that the plan covers (a job paused mid-chain has several).
    siblings = [
        e
        for e in pending
        if e.job_id == job.job_id
        and e.kind == "scheduled"
        and e.attempt == 0
        and plan.next_slot is not None
        and e.scheduled_at < plan.next_slot
    ]
    for sibling in siblings:
        pending.remove(sibling)
    if cut is None:  # else the row at `cut` carries the job on from there
        number = following_number(execution, plan.skipped_count + len(plan.run_slots))
        _carry_on(ports, job, execution, plan.next_slot, number, pending, now, report)
    _apply_catch_up(ports, job, [execution, *siblings], plan, now, to_send, report)


def _carry_on(
    ports: Ports,
    job: Job,
    execution: Execution,
    next_slot: datetime | None,
    number: int | None,
    pending: deque[Execution],
    now: datetime,
    report: DispatchReport,
) -> None:
    """Before `execution` (a missed slot, or an excluded one) ends: create the job's next slot, numbered `number`
    (dispatched in turn if due within the horizon), or complete a bounded schedule that has no slot left (runs
    already sent still run). A pre-loader that dies (or a store call that fails) after this and before the rows
    end leaves them waiting, and the next cycle plans them again; done after, a death between left a chain whose
    last row had ended with nothing after it, or a bounded job active with nothing to run, for good (the
    simulation, seeds 262 and 489 with --bounded).

    Judged late against its spread, the next slot may be due already, even claimed and moved by its retry
    (_rowless; the simulation, seed 5380 with --spread --edits --run-now --backfill)."""
    if next_slot is not None and within_bounds(job.schedule, next_slot, number):
        follower = planned_run(ports, job, next_slot, number, now)
        if _rowless(ports, [follower], now) and ports.store.put_execution(follower):
            report.created += 1
            if follower.due_at <= ports.dispatch_horizon(now):
                pending.append(follower)
    elif job.schedule.is_bounded:
        complete_schedule(ports, job, now)


def pause_unplannable(ports: Ports, job: Job, execution: Execution, now: datetime, why: str) -> Job:
    """Pause `job`, whose slot in `execution` cannot be planned, with a note saying why, as a pause after
    failures does (service/job_ends.py): its waiting rows are held for resume, a `Job Auto-Paused` event is
    published and its owner is told through the DLQ notifier. Returns the job as it now stands: as it was if
    the pause could not be written (a concurrent change, the store down): the next pass tries again."""
    note = f"paused by dispatch: the slot {format_time(execution.scheduled_at)} could not be planned: {why}"
    try:
        paused = ports.store.update_job_status(job, JobStatus.PAUSED, now, note[:MAX_NOTE_CHARS])
        for row in ports.store.open_executions_of_job(job.job_id):
            if row.status == ExecutionStatus.SCHEDULED:
                ports.store.hold_waiting(ports.store.key_of(row))
        job_changed(ports, paused, JobChange.AUTO_PAUSED, now)
        ports.queues.dead_letter(job.job_class, auto_pause_notice(paused, execution))
    except Exception:
        log.exception("pausing job %s failed; the next pass tries again", job.job_id)
        return job
    return paused


def last_bound(job: Job, execution: Execution, schedule: Recurrence, now: datetime) -> datetime | None:
    """The latest instant a slot of `job`'s bounded schedule may have, if it falls before `now` (None: the
    bounds allow every slot up to `now`): endAt, or the slot numbered maxRuns counting from `execution`'s.

    Finding the last slot by maxRuns walks the slots from `execution`'s up to `now`, at most MAX_SCAN of them
    (as many as a catch-up plan walks anyway)."""
    bounds = job.schedule
    end = bounds.end_at if bounds.end_at is not None and bounds.end_at < now else None
    if bounds.max_runs is None or execution.run_number is None:
        return end
    slot = execution.scheduled_at
    for _ in range(min(bounds.max_runs - execution.run_number, MAX_SCAN)):
        if slot > now:
            return end
        slot = schedule.next_after(slot)
    if slot > now:
        return end
    return slot if end is None else min(end, slot)


# A next slot due by now plus this may have been claimed already (clocks of two hosts differ by a little).
CLAIMED_MARGIN = timedelta(seconds=5)


def _rowless(ports: Ports, followers: list[Execution], now: datetime) -> list[Execution]:
    """The next slots to create: all of them but those due already whose slot has a row elsewhere. A slot's
    row is created where its live run would be; a retry moves it to where its retry is due, and there the
    conditional put does not see it. So a row dispatched a second time (a cycle that died before advancing its
    cursor reads it again) would create its next slot again, beside that slot's moved row, and the slot would
    run twice: the simulation found it with seconds schedules, whose next slot has often run by then (seed 83,
    docs/simulation.md). A slot still ahead has not been claimed, so it cannot have moved: one read of the
    job's ids at the slot, only for a next slot already due (a late dispatch)."""
    due = [f for f in followers if f.due_at <= now + CLAIMED_MARGIN]
    moved = set()
    for follower in due:
        slot_ms = to_ms(follower.scheduled_at)
        if follower.execution_id in ports.store.execution_ids_between(follower.job_id, slot_ms, slot_ms + 1):
            moved.add(follower.execution_id)
    return [f for f in followers if f.execution_id not in moved]


def _put_all(ports: Ports, executions: list[Execution], threads: int) -> list[Execution]:
    """Create each execution whose slot is new, `threads` at once; returns those created."""
    if threads <= 1 or len(executions) <= 1:
        return [e for e in executions if ports.store.put_execution(e)]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dispatch-put") as pool:
        created = list(pool.map(ports.store.put_execution, executions))
    return [e for e, new in zip(executions, created, strict=True) if new]


def _send_all(ports: Ports, messages: list[DueMessage], now: datetime, threads: int) -> int:
    """Send the messages a request's worth at a time (10 messages of up to RUNS_PER_MESSAGE runs), `threads`
    requests at once; returns how many were sent."""
    per_request = SQS_BATCH_SIZE * RUNS_PER_MESSAGE
    if threads <= 1 or len(messages) <= per_request:
        return ports.queues.send(messages, now)
    batches = [messages[i : i + per_request] for i in range(0, len(messages), per_request)]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dispatch-send") as pool:
        return sum(pool.map(lambda batch: ports.queues.send(batch, now), batches))


def _planned_later(
    ports: Ports,
    job: Job,
    schedule: Recurrence,
    execution: Execution,
    plan: CatchUpPlan,
    pending: deque[Execution],
    now: datetime,
) -> datetime | None:
    """The first slot after `execution`'s, before `plan`'s next one, that has a `scheduled` row of its own
    outside this batch, or None. Such a row was planned by a dispatch of its own, or will be: a waiting row
    plans from its slot on, and a dispatched one's plan created its follower before anything else. So the
    slots from it on are that row's to account, not this plan's. Not so a row of a slot the schedule no longer
    has, or one ended because an edit moved the schedule (planned under the old one, it carries nothing on);
    a `catchup` row runs its own slot only (a boundary for the skip counts, _rows_elsewhere); a waiting row
    still in this batch joins this plan.

    Two waiting rows of one job come from a cycle that created the next slot and died before ending the
    missed ones, when the two are then planned in different batches (the simulation, seed 85 with spread).
    One read of the job's ids in the span, and one row read an id, in slot order, up to the first found."""
    end = plan.next_slot or now + timedelta(milliseconds=1)
    joining = {e.execution_id for e in pending if e.job_id == job.job_id and e.kind == "scheduled" and e.attempt == 0}
    ids = ports.store.execution_ids_between(job.job_id, to_ms(execution.scheduled_at) + 2, to_ms(end) - 1)
    for slot, row_id in sorted((parse_execution_id(i)[1], i) for i in ids if i not in joining and not i.endswith(".m")):
        if not is_slot(schedule, slot):  # a row of a slot the schedule no longer has: not read
            continue
        row = ports.store.find_execution(job.job_id, row_id)
        if row is not None and row.kind == "scheduled" and row.skip_reason != SCHEDULE_EDITED:
            return slot
    return None


def _excluded_run(execution: Execution, schedule: Recurrence, exclusions: Exclusions) -> tuple[int, datetime | None]:
    """The run of consecutive excluded slots `execution`'s starts: how many, and the first slot after it.

    Counting walks the slots, at most MAX_SCAN of them; a longer run is jumped over by dates and its count stops
    at MAX_SCAN. No slot after it (None) when none is left up to the horizon (domain/horizon.py)."""
    count = 0
    slot = execution.scheduled_at
    while exclusions.excludes(slot) and count < MAX_SCAN:
        count += 1
        slot = schedule.next_after(slot)
    following: datetime | None = slot
    if exclusions.excludes(slot):
        following = next_included(schedule, exclusions, slot)
    return count, following


def _skip_excluded(
    ports: Ports, execution: Execution, count: int, now: datetime, report: DispatchReport, job: Job | None = None
) -> None:
    """End a waiting slot on an excluded date as skipped (`excluded`), one record for the `count` consecutive
    excluded slots it starts (skippedCount)."""
    skipped = ports.store.end_waiting(ports.store.key_of(execution), ExecutionStatus.SKIPPED, now, EXCLUDED, count)
    if skipped is not None:
        report.skipped += count
        run_ended(ports, skipped, job)


def _apply_catch_up(
    ports: Ports,
    job: Job,
    waiting: list[Execution],
    plan: CatchUpPlan,
    now: datetime,
    to_send: list[Execution],
    report: DispatchReport,
) -> None:
    """Carry out a catch-up plan over the job's waiting executions (earliest first).

    A slot that runs uses its waiting execution if it has one, else a new `catchup` execution due now.
    Skipped slots are recorded with bounded work: each waiting execution skipped becomes a skip record whose
    skippedCount covers the skipped slots without a row of their own that follow it (_skip_counts).
    """
    existing = {e.scheduled_at: e for e in sorted(waiting, key=lambda e: e.scheduled_at)}
    runs = set(plan.run_slots)
    skipped_rows = [e for slot, e in existing.items() if slot not in runs]
    elsewhere = _rows_elsewhere(ports, job, plan, existing, skipped_rows)
    # The runs' rows come first, the skip records after: a pre-loader that dies between leaves the waiting rows
    # to be planned again (the next cycle finds the runs' rows there), never a run promised and lost.
    for slot in plan.run_slots:
        if slot in existing:
            # Sent as a catch-up run: beside the other catch-up runs it waits its turn, never "overlaps".
            to_send.append(existing[slot].model_copy(update={"kind": "catchup"}))
            continue
        if slot in elsewhere:
            continue  # its row exists (moved for a retry, or planned before): it runs, or ran, as it is
        # Due at its own slot (past: it is sent at once). The conditional put alone would not see a row of the
        # slot that a retry moved to another due partition: `elsewhere` does.
        catch_up = new_execution(job, slot, kind="catchup")  # spread like its slot, if still in the past
        if ports.store.put_execution(catch_up):
            report.created += 1
            to_send.append(catch_up)
    for row, count in zip(skipped_rows, _skip_counts(job, plan, existing, skipped_rows, elsewhere), strict=True):
        key = ports.store.key_of(row)
        skipped = ports.store.end_waiting(key, ExecutionStatus.SKIPPED, now, plan.skip_reason, count)
        if skipped is not None:
            report.skipped += count
            run_ended(ports, skipped, job)


def _rows_elsewhere(
    ports: Ports, job: Job, plan: CatchUpPlan, existing: dict[datetime, Execution], skipped_rows: list[Execution]
) -> list[datetime]:
    """The slots in `plan`'s span that have a row outside this batch, in order: a row moved for a retry (its key
    follows its due time), one dispatched by the other page of this cycle (the due window's and the
    reconciler's are two), or one planned by an earlier cycle that died before ending the rows before it.
    One read of the job's ids in the span, on this rare path only, when the plan runs or skips a slot that
    has no row in the batch."""
    rowless = plan.skipped_count - len(skipped_rows)
    if not existing or (rowless <= 0 and all(slot in existing for slot in plan.run_slots)):
        return []
    first = min(existing)
    last = plan.next_slot or max([*plan.run_slots, first]) + timedelta(milliseconds=1)
    ours = {e.execution_id for e in existing.values()}
    stored = ports.store.execution_ids_between(job.job_id, to_ms(first), to_ms(last))
    return sorted(parse_execution_id(i)[1] for i in stored if i not in ours and not i.endswith(".m"))


def _skip_counts(
    job: Job,
    plan: CatchUpPlan,
    existing: dict[datetime, Execution],
    skipped_rows: list[Execution],
    elsewhere: list[datetime],
) -> list[int]:
    """The skippedCount of each of `skipped_rows`: itself, and the skipped slots with no row that follow it up
    to the next slot the batch has a row of, or the plan runs, or the plan's next slot.

    Each record counts only the slots after it, so a plan carried out in part (a pre-loader that dies between
    two of its writes) and planned again from the rows still waiting counts every slot once. A slot with a row
    outside the batch (`elsewhere`) is that row's, and the count goes on past it: such a row runs its own slot
    only (a catch-up or backfilled run, wherever a retry moved it), since a `scheduled` row, which carries the
    job on from its slot, ends the plan's span first (_planned_later). Counting stopped there once, and the
    skipped slots after a backfilled one were in no record (the simulation, seed 95 with --edits --run-now
    --backfill).

    Walks the plan's span (at most MAX_SCAN slots, as the plan did); a job with excluded dates, whose slots the
    walk cannot tell, gives the first record every rowless slot instead."""
    elsewhere_ms = {to_ms(slot) for slot in elsewhere}
    runs_ms = {to_ms(slot) for slot in plan.run_slots}
    rowless = plan.skipped_count - len(skipped_rows) - len(elsewhere_ms - runs_ms)
    plain = [1 + max(0, rowless)] + [1] * (len(skipped_rows) - 1) if skipped_rows else []
    schedule = recurrence_of(job.schedule, job.created_at)
    if rowless <= 0 or not skipped_rows or plan.next_slot is None or schedule is None or job.exclude:
        return plain
    counts = {to_ms(row.scheduled_at): 1 for row in skipped_rows}
    boundaries = {to_ms(slot) for slot in existing} | runs_ms
    end_ms = to_ms(plan.next_slot) - 1  # slots are stored to the millisecond: one either way is the same slot
    current: int | None = None
    slot = skipped_rows[0].scheduled_at
    for _ in range(MAX_SCAN):
        ms = to_ms(slot)
        if ms >= end_ms:
            return [counts[to_ms(row.scheduled_at)] for row in skipped_rows]
        near = {ms - 1, ms, ms + 1}
        if own := near & counts.keys():
            current = min(own)
        elif near & boundaries:
            current = None
        elif current is not None and not near & elsewhere_ms:
            counts[current] += 1
        slot = schedule.next_after(slot)
    return plain


def preload(
    ports: Ports, owner: str, threads: int = 1, dispatch_threads: int = 1, group: int = 0, groups: int = 1
) -> DispatchReport:
    """One pre-load cycle over every shard this process can lease: read what is due up to the window's
    end (and anything overdue since the shard's cursor), dispatch it, reconcile a bounded page of the
    shard's open rows, move the cursor to the window's end and hand the shard's lease back.

    Shards run `threads` at a time, starting from a shard that rotates every interval; one shard's error
    is logged and counted (`errors`) and the others still run. Within a shard, next slots are created and
    messages sent `dispatch_threads` at a time. With `groups` > 1 this cycle covers only the shards of
    `group` (shard % groups == group): one invocation per group fans a cycle out (infra/scheduling.py).

    Each due hour has its own shard count (fixed before its first row, domain/keys.py); the cycle first fixes
    the counts of the hours up to SHARD_COUNT_FIXED_AHEAD (cached: no call once this process has them) and
    visits every shard any bucket was fixed with, so a change of `shards` never strands a row.
    """
    if not 0 <= group < groups:
        raise ValueError(f"shard group {group} is not one of 0..{groups - 1}")
    with batched_events(ports) as batched:  # the cycle's skipped runs are published together at its end
        return _preload(batched, owner, threads, dispatch_threads, group, groups)


def _preload(ports: Ports, owner: str, threads: int, dispatch_threads: int, group: int, groups: int) -> DispatchReport:
    now = ports.clock()
    for hour in _hours_between(to_ms(now) - 1, to_ms(now + SHARD_COUNT_FIXED_AHEAD)):
        ports.store.shards_of_bucket(hour_bucket(hour))
    count = ports.store.most_shards()
    first = int(now.timestamp() // ports.settings.preload_interval_seconds) % count
    order = [shard for shard in ((first + i) % count for i in range(count)) if shard % groups == group]
    total = DispatchReport()
    if threads <= 1:
        reports = [_preload_shard_isolated(ports, owner, shard, now, dispatch_threads) for shard in order]
    else:
        with ThreadPoolExecutor(max_workers=min(threads, max(1, len(order))), thread_name_prefix="preload") as pool:
            reports = list(
                pool.map(lambda shard: _preload_shard_isolated(ports, owner, shard, now, dispatch_threads), order)
            )
    for report in reports:
        total.add(report)
    return total


def _preload_shard_isolated(ports: Ports, owner: str, shard: int, now: datetime, threads: int) -> DispatchReport:
    try:
        return _preload_shard(ports, owner, shard, now, threads)
    except Exception:  # one shard's failure must not starve the others; its lease goes back at once
        log.exception("pre-load of shard %d failed", shard)
        with contextlib.suppress(Exception):
            ports.store.release_lease(preload_record_key(shard), owner)
        return DispatchReport(errors=1)


def _preload_shard(ports: Ports, owner: str, shard: int, now: datetime, threads: int) -> DispatchReport:
    record_key = preload_record_key(shard)
    window_end = now + timedelta(seconds=ports.settings.preload_window_seconds)
    # Held only while this cycle works on the shard (handed back at its end); a crashed cycle's lease
    # ends before the next tick.
    lease_until = now + timedelta(seconds=ports.settings.preload_interval_seconds)
    record = ports.store.acquire_lease(record_key, owner, to_ms(now), to_ms(lease_until))
    if record is None:
        return DispatchReport(busy=1)  # another pre-loader is working on this shard right now
    cursor_ms = int(record.get("cursorMs", to_ms(now - FIRST_LOOKBACK)))
    due: list[Execution] = []
    for partition in _partitions_between(ports, shard, cursor_ms, to_ms(window_end)):
        due.extend(ports.store.query_due(partition, cursor_ms, to_ms(window_end)))
    report = dispatch(ports, due, now, threads=threads) if due else DispatchReport()
    late_ms = to_ms(now - reconcile_after(ports))
    # A shard's first sweep goes back FIRST_LOOKBACK, once. After that a cycle sweeps at most sweep_span_ms of due
    # time: after an outage the sweep catches up over a few cycles instead of reading hours of rows in one.
    if "sweptMs" in record:
        swept_from = int(record["sweptMs"])
        swept_ms = max(swept_from, min(late_ms, swept_from + sweep_span_ms(ports)))
    else:
        swept_from, swept_ms = late_ms - FIRST_LOOKBACK_MS, late_ms
    report.swept = sweep(ports, shard, swept_from, swept_ms)
    reconciled, reconcile_from = reconcile_page(ports, shard, now, record.get("reconcileFrom"))
    report.add(reconciled)
    ports.store.advance_cursor(record_key, owner, to_ms(window_end), reconcile_from, swept_ms)
    report.shards = 1
    return report


def sweep_span_ms(ports: Ports) -> int:
    """The most due time one cycle's sweep covers: SWEEP_CYCLES_AT_MOST times the longer of the pre-load
    interval and `reconcile_after` (in steady state a cycle sweeps one interval; 15 minutes on AWS)."""
    longer = max(ports.settings.preload_interval_seconds, ports.settings.reconcile_after_seconds())
    return SWEEP_CYCLES_AT_MOST * longer * 1000


def sweep(ports: Ports, shard: int, after_ms: int, until_ms: int) -> int:
    """Put into the open set each row of `shard` due in (after_ms, until_ms] that is still open (Store.sweep_open):
    the pre-loader sweeps each range once, as it becomes `reconcile_after` overdue, before the reconciler reads
    the open set. On DynamoDB a row enters the `open` index only here (unless written already due), so the
    index costs a run that ends in time nothing; on SQLite every open row is in it from its write. A row
    still open when its range is swept (a lost message, a lost worker, a long run, a paused job's) is what
    the reconciler must see; it stays in the index until it ends."""
    if until_ms <= after_ms:
        return 0
    return sum(
        ports.store.sweep_open(p, after_ms, until_ms) for p in _partitions_between(ports, shard, after_ms, until_ms)
    )


def _partitions_between(ports: Ports, shard: int, after_ms: int, until_ms: int) -> list[str]:
    """`shard`'s due partitions of the hours from after_ms to until_ms. An hour not fixed yet holds no row; an
    hour fixed with fewer shards has no partition for this one."""
    hours = _hours_between(after_ms, until_ms)
    counts = ports.store.recorded_shards([hour_bucket(hour) for hour in hours])
    return [due_partition(hour, shard) for hour in hours if shard < counts.get(hour_bucket(hour), 0)]


def reconcile(ports: Ports, shard: int, now: datetime) -> DispatchReport:
    """Reconcile `shard`'s open rows from the start of the `open` index (one bounded page), after a sweep of
    the rows due over the last FIRST_LOOKBACK before `reconcile_after` ago (a shard's first cycle's)."""
    late_ms = to_ms(now - reconcile_after(ports))
    swept = sweep(ports, shard, late_ms - FIRST_LOOKBACK_MS, late_ms)
    report = reconcile_page(ports, shard, now, None)[0]
    report.swept = swept
    return report


def reconcile_page(ports: Ports, shard: int, now: datetime, after: str | None) -> tuple[DispatchReport, str | None]:
    """Send again what has no live message: waiting executions long overdue (a crash between a write and
    its send, a lost message), running ones whose lease ended long ago (a lost in-flight message), and the
    notice of a failed execution whose owner was never told (a crash between its end and the DLQ send).

    Reads at most RECONCILE_ROWS_PER_SHARD open rows, from `after` (where the last cycle stopped); returns
    where the next cycle goes on. A waiting row of a paused job found here leaves the `open` index (resume
    puts it back), so a pause costs the reconciler nothing after one look.

    Sending twice is harmless: the claim is conditional, so a duplicate finds the row held or ended; a
    notice sent twice tells the owner twice (notices are at least once).
    """
    late = now - reconcile_after(ports)
    page = ports.store.open_page(shard, to_ms(late), RECONCILE_ROWS_PER_SHARD, after)
    open_rows = page.executions
    waiting = [e for e in open_rows if e.status == ExecutionStatus.SCHEDULED]
    abandoned = [
        e for e in open_rows if e.status == ExecutionStatus.RUNNING and e.lease_until and e.lease_until <= late
    ]
    untold = [e for e in open_rows if e.status == ExecutionStatus.FAILED and e.finished_at and e.finished_at <= late]
    read = waiting + abandoned + untold
    jobs = ports.store.get_jobs(sorted({e.job_id for e in read})) if read else {}
    report = DispatchReport()
    # A paused job's run whose worker was lost waits for resume (its claim would only say `held`): not resent
    # every cycle meanwhile. A cancelled (or deleted) job's is ended as the cancel would have ended it, had it
    # not died first: its claim would only say `done`, and the row would stay running for good.
    status_of = {e.execution_id: job.status if (job := jobs.get(e.job_id)) else None for e in abandoned}
    for execution in [e for e in abandoned if status_of[e.execution_id] in (None, JobStatus.CANCELLED)]:
        key = ports.store.key_of(execution)
        with contextlib.suppress(Conflict):  # it ended or was taken over meanwhile
            ports.store.end_claimed(key, execution.attempt, ExecutionStatus.CANCELLED, now, "job cancelled")
            report.cancelled += 1
    abandoned = [e for e in abandoned if status_of[e.execution_id] not in (None, JobStatus.CANCELLED, JobStatus.PAUSED)]
    held = [e for e in waiting if (job := jobs.get(e.job_id)) is not None and job.status == JobStatus.PAUSED]
    for execution in held:
        ports.store.hold_waiting(ports.store.key_of(execution))
    report.held += len(held)
    held_ids = {e.execution_id for e in held}
    sendable = [e for e in waiting if e.execution_id not in held_ids]
    # A run that has not started by its job's lateness budget is found late here, once (service/lateness.py).
    find_unstarted(ports, jobs, sendable, now)
    waiting_turn = _not_their_turn(ports, jobs, sendable, now)
    sendable = [e for e in sendable if e.execution_id not in waiting_turn]
    if sendable:
        report.add(dispatch(ports, sendable, now, known_jobs=jobs))
    if abandoned:
        ports.queues.send([DueMessage.for_execution(e, ports.store.key_of(e)) for e in abandoned], now)
    for execution in untold:
        ports.queues.dead_letter(execution.job_class, failure_notice(ports, execution, jobs.get(execution.job_id)))
    report.resent = report.sent + len(abandoned) + len(untold)
    report.sent += len(abandoned)
    return report, page.next_token


def _takes_turns(execution: Execution) -> str | None:
    """The queue of runs `execution` waits in, one after another, behind its job's running one: `catchup`
    runs, and serial (`forbid`) backfilled runs; None for any other run."""
    if execution.kind == "catchup":
        return "catchup"
    if execution.kind == "backfill" and execution.overlap == Overlap.FORBID:
        return "backfill"
    return None


def _not_their_turn(ports: Ports, jobs: dict[str, Job], waiting: list[Execution], now: datetime) -> set[str]:
    """The overdue waiting runs not to send again: runs that take turns (catch-up runs, serial backfills) of
    an active job while another of its runs holds a live lease, or while an earlier run of their queue waits
    (it goes first). Such a run has a message already: its claim answered BUSY and the worker sent a fresh
    copy for later, again and again. A copy sent every cycle beside it would be deferred the same way and live
    as long, so a backlog of n such runs would carry one more copy each every cycle, each received every third
    of a lease (the simulation found it with seconds schedules, docs/simulation.md). Its turn comes once the
    runs before it end: then it is sent, should its own message have been lost. One read of the job's open
    rows per job with such runs."""
    skip: set[str] = set()
    for job_id in sorted({e.job_id for e in waiting if _takes_turns(e) is not None}):
        job = jobs.get(job_id)
        if job is None or job.status != JobStatus.ACTIVE:
            continue  # a cancelled or completed job's waiting rows are ended by the dispatch that follows
        rows = ports.store.open_executions_of_job(job_id)
        live = any(row.lease_live(now) for row in rows)
        queues: dict[str, list[Execution]] = {}
        for row in rows:
            turns = _takes_turns(row)
            if turns is not None and row.status == ExecutionStatus.SCHEDULED:
                queues.setdefault(turns, []).append(row)
        for queued in queues.values():
            first = min(queued, key=lambda row: row.execution_id)
            skip.update(row.execution_id for row in queued if live or row is not first)
    return skip


def _hours_between(after_ms: int, until_ms: int) -> list[datetime]:
    start = from_ms(after_ms + 1).replace(minute=0, second=0, microsecond=0)
    end = from_ms(until_ms)
    hours = []
    current = start
    while current <= end:
        hours.append(current)
        current += timedelta(hours=1)
    return hours
