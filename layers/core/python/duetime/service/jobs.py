"""Job use-cases: submit, read, list, pause, resume, cancel, run now, history and schedule preview."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.cron import load_zone
from duetime.domain.errors import Conflict, IdempotencyMismatch, InvalidInput, InvalidSchedule, NotFound
from duetime.domain.exclusions import Calendar, Exclusions
from duetime.domain.keys import in_key_range
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec, JobStatus, Schedule
from duetime.domain.quotas import JOB_CREATES_PER_MINUTE, RUN_NOWS_PER_MINUTE, rate_window
from duetime.domain.recurrence import included_runs, next_included, recurrence_of
from duetime.domain.webhooks import is_webhook, parse_webhook_url
from duetime.service.calendars import CalendarCache, check_references
from duetime.service.context import Ports
from duetime.service.dispatch import dispatch, new_execution
from duetime.service.handlers import check_handler
from duetime.service.ports import DueMessage

MAX_AT_AHEAD = timedelta(days=366)
# A one-off in the past runs at once; further back than this it is a mistake (a 1969 date would give an
# id no parser accepts).
MAX_AT_BEHIND = timedelta(days=366)
IDEMPOTENCY_TTL = timedelta(hours=24)
NEXT_RUNS_SHOWN = 5


@dataclass(frozen=True)
class JobView:
    job: Job
    next_runs: list[datetime]


def validate_spec(ports: Ports, spec: JobSpec, now: datetime) -> tuple[JobSpec, datetime]:
    """Check what pydantic cannot; returns the spec with its class's defaults applied and the first slot.

    Raises InvalidInput naming the field. An unset timeoutSeconds is 3600 capped at what the job class
    can run (the `default` class runs on Lambda, 14 minutes at most).
    """
    job_class = ports.settings.job_classes.get(spec.job_class)
    if job_class is None:
        known = ", ".join(sorted(ports.settings.job_classes))
        raise InvalidInput(f"unknown jobClass {spec.job_class!r} (known: {known})", field="jobClass")
    if "timeout_seconds" not in spec.model_fields_set:
        spec = spec.model_copy(update={"timeout_seconds": min(spec.timeout_seconds, job_class.max_timeout_seconds)})
    if spec.timeout_seconds > job_class.max_timeout_seconds:
        raise InvalidInput(
            f"timeoutSeconds {spec.timeout_seconds} exceeds {job_class.max_timeout_seconds} for jobClass "
            f"{spec.job_class!r} ({job_class.worker_kind} workers)"
            + ("; use jobClass 'long' for longer jobs" if spec.job_class != "long" else ""),
            field="timeoutSeconds",
        )
    if is_webhook(spec.handler):
        parse_webhook_url(spec.handler, ports.settings.allow_loopback_webhooks)  # DNS is checked at each call
    if spec.exclude and not spec.schedule.is_recurring:
        raise InvalidInput("exclude applies to 'cron' and 'every' schedules; an 'at' job runs once", field="exclude")
    if spec.retry.max_delay_seconds < spec.retry.base_delay_seconds:
        raise InvalidInput("retry.maxDelaySeconds must be at least baseDelaySeconds", field="retry.maxDelaySeconds")
    return spec, first_slot(spec.schedule, now)


def first_slot(schedule: Schedule, now: datetime) -> datetime:
    if schedule.at is not None:
        load_zone(schedule.time_zone)  # unused by `at`, but an unknown zone is still a mistake to report
        if schedule.at - now > MAX_AT_AHEAD:
            raise InvalidSchedule("schedule.at is more than a year ahead", field="schedule.at")
        if now - schedule.at > MAX_AT_BEHIND or not in_key_range(schedule.at):
            raise InvalidSchedule("schedule.at is more than a year ago", field="schedule.at")
        return schedule.at
    if schedule.every is not None:
        load_zone(schedule.time_zone)  # intervals are elapsed time, but an unknown zone is still a mistake
    recurrence = recurrence_of(schedule, created_at=now)
    assert recurrence is not None
    return recurrence.next_after(now)


def anchored(spec: JobSpec, now: datetime) -> JobSpec:
    """The spec with an interval's `startAt` set (its creation time when unset), so its slots never move."""
    if spec.schedule.every is None or spec.schedule.start_at is not None:
        return spec
    return spec.model_copy(update={"schedule": spec.schedule.model_copy(update={"start_at": now})})


def body_hash(spec: JobSpec) -> str:
    return hashlib.sha256(spec.model_dump_json(by_alias=True).encode()).hexdigest()


def submit_job(
    ports: Ports,
    owner: str,
    spec: JobSpec,
    idempotency_key: str | None = None,
    groups: Sequence[str] = (),
) -> tuple[Job, bool]:
    """Store a job with its first execution (one transaction) and send that execution at once if it is
    due within the dispatch horizon. Returns (job, created); an Idempotency-Key seen before with the same
    body returns the first job, with another body raises IdempotencyMismatch.

    The handler must be granted to the owner (or one of its `groups`), else Forbidden, and served by the
    job class's workers, else InvalidInput listing what is served; both name the field `handler`. An owner
    at its activeJobs or jobCreatesPerMinute quota (ports.quotas) gets QuotaExceeded naming it.
    """
    now = ports.clock()
    spec, slot = validate_spec(ports, spec, now)
    check_handler(ports, owner, groups, spec.handler, spec.job_class)
    check_references(ports, owner, spec.exclude)
    idem_key = f"idem#{owner}#{idempotency_key}" if idempotency_key else None
    digest = body_hash(spec)
    if idem_key:
        existing = _idempotent_replay(ports, owner, idem_key, digest)
        if existing:
            return existing, False
    job = Job(
        **anchored(spec, now).model_dump(),
        job_id=f"j_{ports.random_hex()}",
        owner=owner,
        owner_groups=list(groups),
        created_at=now,
        updated_at=now,
    )
    first = new_execution(job, slot)
    idempotency = None
    if idem_key:
        expires = int((now + IDEMPOTENCY_TTL).timestamp())
        idempotency = {"key": idem_key, "bodyHash": digest, "expiresAt": expires}
    quotas = ports.quotas
    rate = None
    if quotas.job_creates_per_minute is not None:
        rate = rate_window(owner, JOB_CREATES_PER_MINUTE, quotas.job_creates_per_minute, now)
    try:
        # The owner's counters are charged in the job's own transaction: a replay or a refused job costs none.
        ports.store.create_job(job, first, idempotency, quotas.max_active_jobs, rate)
    except Conflict:
        if idem_key:
            existing = _idempotent_replay(ports, owner, idem_key, digest)
            if existing:
                return existing, False
        raise
    if slot <= ports.dispatch_horizon(now):
        dispatch(ports, [first], now, known_jobs={job.job_id: job})
    return job.model_copy(update={"next_run_at": slot}), True


def _idempotent_replay(ports: Ports, owner: str, idem_key: str, digest: str) -> Job | None:
    record = ports.store.get_control(idem_key)
    if record is None:
        return None
    if record.get("bodyHash") != digest:
        raise IdempotencyMismatch("Idempotency-Key was used with a different request body", field="Idempotency-Key")
    return get_job(ports, owner, str(record["jobId"])).job


def get_owned_job(ports: Ports, owner: str, job_id: str) -> Job:
    job = ports.store.get_job(job_id)
    if job is None or job.owner != owner:
        raise NotFound(f"job {job_id!r} not found", field="jobId")
    return job


def waiting_executions(ports: Ports, job_id: str) -> list[Execution]:
    """The job's waiting (scheduled) executions, earliest due first: read from its open rows only."""
    open_rows = ports.store.open_executions_of_job(job_id)
    return sorted((e for e in open_rows if e.status == ExecutionStatus.SCHEDULED), key=lambda e: e.due_at)


def get_job(ports: Ports, owner: str, job_id: str) -> JobView:
    """The job with nextRunAt (its earliest waiting execution) and, for cron jobs, the next few runs."""
    job = get_owned_job(ports, owner, job_id)
    waiting = waiting_executions(ports, job_id) if job.status != JobStatus.CANCELLED else []
    return describe(job, waiting[0].due_at if waiting else None, ports.clock(), CalendarCache(ports).of(job))


def describe(
    job: Job, next_run: datetime | None, now: datetime, calendars: Mapping[str, Calendar] | None = None
) -> JobView:
    """The view of a job whose earliest waiting execution is due at `next_run` (a new job's is its first
    slot, so creating one needs no read back); `calendars` are its owner's, if it names any."""
    runs: list[datetime] = []
    schedule = recurrence_of(job.schedule, job.created_at)
    if schedule is not None and job.status == JobStatus.ACTIVE:
        exclusions = Exclusions(job.exclude, job.schedule.time_zone, calendars)
        if next_run is not None and exclusions.excludes(next_run):
            # The waiting slot is on an excluded date: it will be recorded skipped, not run.
            next_run = next_included(schedule, exclusions, next_run)
        start = next_run or now
        later = included_runs(schedule, exclusions, start, NEXT_RUNS_SHOWN - (1 if next_run else 0))
        runs = ([next_run] if next_run else []) + later
    elif next_run:
        runs = [next_run]
    return JobView(job=job.model_copy(update={"next_run_at": next_run}), next_runs=runs)


def list_jobs(ports: Ports, owner: str, limit: int, cursor: str | None) -> tuple[list[Job], str | None]:
    """The owner's jobs, newest first; raises InvalidInput naming `cursor` for one not of this owner."""
    page = ports.store.list_jobs(owner, limit, cursor)
    return page.items, page.cursor


def list_executions(
    ports: Ports, owner: str, job_id: str, limit: int, cursor: str | None
) -> tuple[list[Execution], str | None]:
    """The job's executions, newest first; raises NotFound for another owner's job, InvalidInput naming
    `cursor` for a cursor of another job."""
    get_owned_job(ports, owner, job_id)
    page = ports.store.list_executions(job_id, limit, cursor)
    return page.items, page.cursor


def pause_job(ports: Ports, owner: str, job_id: str) -> JobView:
    """No new runs start; the waiting execution stays waiting (and is not run if already queued)."""
    job = get_owned_job(ports, owner, job_id)
    if job.status == JobStatus.CANCELLED:
        raise Conflict("a cancelled job cannot be paused", field="status")
    if job.status == JobStatus.ACTIVE:
        ports.store.update_job_status(job, JobStatus.PAUSED, ports.clock())
        # Held rows leave the reconciler's `open` index: a pause costs it nothing per cycle. One that a
        # concurrent dispatch creates meanwhile is held by the reconciler when it first finds it.
        for execution in waiting_executions(ports, job_id):
            ports.store.hold_waiting(ports.store.key_of(execution))
    return get_job(ports, owner, job_id)


def resume_job(ports: Ports, owner: str, job_id: str) -> JobView:
    """Active again: the waiting execution is dispatched, so missed slots follow the catch-up policy."""
    job = get_owned_job(ports, owner, job_id)
    if job.status == JobStatus.CANCELLED:
        raise Conflict("a cancelled job cannot be resumed", field="status")
    if job.status == JobStatus.PAUSED:
        now = ports.clock()
        job = ports.store.update_job_status(job, JobStatus.ACTIVE, now)
        held = waiting_executions(ports, job_id)
        for execution in held:  # back where the reconciler looks, before anything is sent
            ports.store.unhold_waiting(ports.store.key_of(execution))
        waiting = [e for e in held if e.due_at <= ports.dispatch_horizon(now)]
        if waiting:
            dispatch(ports, waiting, now, known_jobs={job.job_id: job})
    return get_job(ports, owner, job_id)


def cancel_job(ports: Ports, owner: str, job_id: str) -> None:
    """The job ends `cancelled`; its waiting executions end `cancelled`, a running one is fenced out.

    Only the job's open rows are read (the `openByJob` index), so the work is bounded by what is open,
    never by the job's history.
    """
    job = get_owned_job(ports, owner, job_id)
    now = ports.clock()
    if job.status != JobStatus.CANCELLED:
        ports.store.update_job_status(job, JobStatus.CANCELLED, now)
    for execution in ports.store.open_executions_of_job(job_id):
        key = ports.store.key_of(execution)
        if execution.status == ExecutionStatus.SCHEDULED:
            ports.store.end_waiting(key, ExecutionStatus.CANCELLED, now, "job cancelled")
        elif execution.status == ExecutionStatus.RUNNING:
            with contextlib.suppress(Conflict):  # it ended meanwhile
                ports.store.end_claimed(key, execution.attempt, ExecutionStatus.CANCELLED, now, "job cancelled")


def run_now(ports: Ports, owner: str, job_id: str) -> Execution:
    """An execution due now, outside the schedule; the schedule is not disturbed. Raises QuotaExceeded
    past the owner's runNowsPerMinute."""
    job = get_owned_job(ports, owner, job_id)
    if job.status != JobStatus.ACTIVE:
        raise Conflict(f"job is {job.status.value}; only an active job can run now", field="status")
    now = ports.clock()
    if ports.quotas.run_nows_per_minute is not None:
        ports.store.count_request(rate_window(owner, RUN_NOWS_PER_MINUTE, ports.quotas.run_nows_per_minute, now))
    execution = new_execution(job, now, kind="manual")
    if not ports.store.put_execution(execution):
        raise Conflict("a run was requested at this same instant already")
    ports.queues.send([DueMessage.for_execution(execution, ports.store.key_of(execution))], now)
    return execution


def preview(
    schedule: Schedule,
    start: datetime,
    count: int,
    exclude: Sequence[str] = (),
    calendars: Mapping[str, Calendar] | None = None,
) -> list[datetime]:
    """The next `count` run times of a schedule after `start`, by the rules of docs/schedules.md (an
    interval without `startAt` is anchored at `start`, as a job submitted then would be); slots on
    `exclude` dates (inline or in the named `calendars` it refers to) are left out, as they will not run."""
    if schedule.at is not None:
        return [schedule.at] if schedule.at > start else []
    recurrence = recurrence_of(schedule, created_at=start)
    assert recurrence is not None
    return included_runs(recurrence, Exclusions(exclude, schedule.time_zone, calendars), start, count)
