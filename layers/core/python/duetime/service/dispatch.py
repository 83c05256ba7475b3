"""Dispatch: pre-load each shard's due window into SQS, create cron's next run, apply catch-up."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.catchup import CatchUpPlan, plan_catch_up
from duetime.domain.cron import CronSchedule
from duetime.domain.keys import due_partition, execution_id
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus, RunKind, from_ms, to_ms
from duetime.service.context import Ports
from duetime.service.executions import failure_notice
from duetime.service.ports import DueMessage

# Where a shard's pre-loader starts when it has no cursor yet (a new deployment).
FIRST_LOOKBACK = timedelta(hours=1)


def new_execution(job: Job, slot: datetime, due_at: datetime | None = None, kind: RunKind = "scheduled") -> Execution:
    return Execution(
        execution_id=execution_id(job.job_id, slot, manual=kind == "manual"),
        job_id=job.job_id,
        scheduled_at=slot,
        due_at=due_at or slot,
        job_class=job.job_class,
        kind=kind,
    )


@dataclass
class DispatchReport:
    sent: int = 0
    created: int = 0
    skipped: int = 0
    cancelled: int = 0
    held: int = 0  # waiting executions of paused jobs, left for resume
    resent: int = 0  # overdue or abandoned executions the reconciler sent again

    def add(self, other: DispatchReport) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def reconcile_after(ports: Ports) -> timedelta:
    """How overdue an open execution must be before the reconciler sends it again: three pre-load cycles
    (a message sent normally has long been delivered by then) and at least one lease past its end."""
    interval = ports.settings.preload_interval_seconds
    lease = max(c.lease_seconds for c in ports.settings.job_classes.values())
    return timedelta(seconds=max(3 * interval, lease + interval))


def dispatch(
    ports: Ports, executions: list[Execution], now: datetime, known_jobs: dict[str, Job] | None = None
) -> DispatchReport:
    """Send waiting executions to their queues, doing at dispatch what the schedule asks.

    For a cron execution this creates the next slot (from the scheduled time, never the clock) and, if
    that is due within the dispatch horizon, dispatches it too; a missed slot goes through the job's
    catch-up policy. Executions of cancelled jobs end `cancelled`; those of paused jobs stay waiting.
    `known_jobs` are jobs the caller has just read or written, so they are not read again.
    """
    report = DispatchReport()
    known = known_jobs or {}
    missing = [e.job_id for e in executions if e.job_id not in known]
    jobs = {**known, **(ports.store.get_jobs(missing) if missing else {})}
    horizon = ports.dispatch_horizon(now)
    pending = deque(executions)
    to_send: list[Execution] = []
    while pending:
        execution = pending.popleft()
        job = jobs.get(execution.job_id)
        if job is None or job.status == JobStatus.CANCELLED:
            if ports.store.end_waiting(ports.store.key_of(execution), ExecutionStatus.CANCELLED, now):
                report.cancelled += 1
            continue
        if job.status == JobStatus.PAUSED:
            report.held += 1
            continue
        if job.schedule.cron is None or execution.kind != "scheduled" or execution.attempt > 0:
            to_send.append(execution)
            continue
        schedule = CronSchedule(job.schedule.cron, job.schedule.time_zone)
        plan = plan_catch_up(schedule, execution.scheduled_at, now, job.catch_up, job.starting_deadline_seconds)
        if plan is None:
            to_send.append(execution)
            next_slot: datetime | None = schedule.next_after(execution.scheduled_at)
        else:
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
            _apply_catch_up(ports, job, [execution, *siblings], plan, now, to_send, report)
            next_slot = plan.next_slot
        if next_slot is not None:
            follower = new_execution(job, next_slot)
            if ports.store.put_execution(follower):
                report.created += 1
                if next_slot <= horizon:
                    pending.append(follower)
    report.sent += ports.queues.send([DueMessage.for_execution(e, ports.store.key_of(e)) for e in to_send], now)
    return report


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
    Skipped slots are recorded with bounded work: the earliest waiting execution becomes one skip record
    whose skippedCount covers every skipped slot without a row of its own.
    """
    existing = {e.scheduled_at: e for e in sorted(waiting, key=lambda e: e.scheduled_at)}
    runs = set(plan.run_slots)
    skipped_rows = [e for slot, e in existing.items() if slot not in runs]
    for index, row in enumerate(skipped_rows):
        count = plan.skipped_count - (len(skipped_rows) - 1) if index == 0 else 1
        key = ports.store.key_of(row)
        if ports.store.end_waiting(key, ExecutionStatus.SKIPPED, now, plan.skip_reason, count) is not None:
            report.skipped += count
    for slot in plan.run_slots:
        if slot in existing:
            # Sent as a catch-up run: beside the other catch-up runs it waits its turn, never "overlaps".
            to_send.append(existing[slot].model_copy(update={"kind": "catchup"}))
            continue
        # Due at its own slot (past: it is sent at once): the key derives from the slot, so the conditional
        # put can never create a second row for it, however often the plan is carried out.
        catch_up = new_execution(job, slot, kind="catchup")
        if ports.store.put_execution(catch_up):
            report.created += 1
            to_send.append(catch_up)


def preload(ports: Ports, owner: str) -> DispatchReport:
    """One pre-load cycle over every shard this process can lease: read what is due up to the window's
    end (and anything overdue since the shard's cursor), dispatch it, move the cursor to the window's end."""
    total = DispatchReport()
    now = ports.clock()
    window_end = now + timedelta(seconds=ports.settings.preload_window_seconds)
    lease_until = now + timedelta(seconds=ports.settings.preload_interval_seconds * 3)
    for shard in range(ports.settings.shards):
        record_key = f"preload#{shard:03d}"
        record = ports.store.acquire_lease(record_key, owner, to_ms(now), to_ms(lease_until))
        if record is None:
            continue  # another pre-loader holds this shard
        cursor_ms = int(record.get("cursorMs", to_ms(now - FIRST_LOOKBACK)))
        due: list[Execution] = []
        for hour in _hours_between(cursor_ms, to_ms(window_end)):
            due.extend(ports.store.query_due(due_partition(hour, shard), cursor_ms, to_ms(window_end)))
        if due:
            total.add(dispatch(ports, due, now))
        ports.store.advance_cursor(record_key, owner, to_ms(window_end))
        total.add(reconcile(ports, shard, now))
    return total


def reconcile(ports: Ports, shard: int, now: datetime) -> DispatchReport:
    """Send again what has no live message: waiting executions long overdue (a crash between a write and
    its send, a lost message), running ones whose lease ended long ago (a lost in-flight message), and the
    notice of a failed execution whose owner was never told (a crash between its end and the DLQ send).

    Sending twice is harmless: the claim is conditional, so a duplicate finds the row held or ended; a
    notice sent twice tells the owner twice (notices are at least once).
    """
    late = now - reconcile_after(ports)
    open_rows = ports.store.open_executions(shard, to_ms(late))
    waiting = [e for e in open_rows if e.status == ExecutionStatus.SCHEDULED]
    abandoned = [
        e for e in open_rows if e.status == ExecutionStatus.RUNNING and e.lease_until and e.lease_until <= late
    ]
    untold = [e for e in open_rows if e.status == ExecutionStatus.FAILED and e.finished_at and e.finished_at <= late]
    report = dispatch(ports, waiting, now) if waiting else DispatchReport()
    if abandoned:
        ports.queues.send([DueMessage.for_execution(e, ports.store.key_of(e)) for e in abandoned], now)
    if untold:
        jobs = ports.store.get_jobs([e.job_id for e in untold])
        for execution in untold:
            ports.queues.dead_letter(execution.job_class, failure_notice(ports, execution, jobs.get(execution.job_id)))
    report.resent = report.sent + len(abandoned) + len(untold)
    report.sent += len(abandoned)
    return report


def _hours_between(after_ms: int, until_ms: int) -> list[datetime]:
    start = from_ms(after_ms + 1).replace(minute=0, second=0, microsecond=0)
    end = from_ms(until_ms)
    hours = []
    current = start
    while current <= end:
        hours.append(current)
        current += timedelta(hours=1)
    return hours
