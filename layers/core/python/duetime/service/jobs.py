"""Job use-cases: submit, read, list, pause, resume, cancel, run now, history and schedule preview."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.domain.cron import CronSchedule, load_zone
from duetime.domain.errors import Conflict, IdempotencyMismatch, InvalidInput, InvalidSchedule, NotFound
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec, JobStatus, Schedule
from duetime.service.context import Ports
from duetime.service.dispatch import dispatch, new_execution
from duetime.service.ports import DueMessage

MAX_AT_AHEAD = timedelta(days=366)
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
    if spec.retry.max_delay_seconds < spec.retry.base_delay_seconds:
        raise InvalidInput("retry.maxDelaySeconds must be at least baseDelaySeconds", field="retry.maxDelaySeconds")
    return spec, first_slot(spec.schedule, now)


def first_slot(schedule: Schedule, now: datetime) -> datetime:
    if schedule.at is not None:
        load_zone(schedule.time_zone)  # unused by `at`, but an unknown zone is still a mistake to report
        if schedule.at - now > MAX_AT_AHEAD:
            raise InvalidSchedule("schedule.at is more than a year ahead", field="schedule.at")
        return schedule.at
    assert schedule.cron is not None
    return CronSchedule(schedule.cron, schedule.time_zone).next_after(now)


def body_hash(spec: JobSpec) -> str:
    return hashlib.sha256(spec.model_dump_json(by_alias=True).encode()).hexdigest()


def submit_job(ports: Ports, owner: str, spec: JobSpec, idempotency_key: str | None = None) -> tuple[Job, bool]:
    """Store a job with its first execution (one transaction) and send that execution at once if it is
    due within the dispatch horizon. Returns (job, created); an Idempotency-Key seen before with the same
    body returns the first job, with another body raises IdempotencyMismatch."""
    now = ports.clock()
    spec, slot = validate_spec(ports, spec, now)
    idem_key = f"idem#{owner}#{idempotency_key}" if idempotency_key else None
    digest = body_hash(spec)
    if idem_key:
        existing = _idempotent_replay(ports, owner, idem_key, digest)
        if existing:
            return existing, False
    job = Job(**spec.model_dump(), job_id=f"j_{ports.random_hex()}", owner=owner, created_at=now, updated_at=now)
    first = new_execution(job, slot)
    idempotency = None
    if idem_key:
        expires = int((now + IDEMPOTENCY_TTL).timestamp())
        idempotency = {"key": idem_key, "bodyHash": digest, "expiresAt": expires}
    try:
        ports.store.create_job(job, first, idempotency)
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
    """The job's waiting (scheduled) executions among its most recent ones, earliest due first."""
    recent = ports.store.executions_of_job(job_id, newest_first=True, limit=50)
    return sorted((e for e in recent if e.status == ExecutionStatus.SCHEDULED), key=lambda e: e.due_at)


def get_job(ports: Ports, owner: str, job_id: str) -> JobView:
    """The job with nextRunAt (its earliest waiting execution) and, for cron jobs, the next few runs."""
    job = get_owned_job(ports, owner, job_id)
    waiting = waiting_executions(ports, job_id) if job.status != JobStatus.CANCELLED else []
    return describe(job, waiting[0].due_at if waiting else None, ports.clock())


def describe(job: Job, next_run: datetime | None, now: datetime) -> JobView:
    """The view of a job whose earliest waiting execution is due at `next_run` (a new job's is its first
    slot, so creating one needs no read back)."""
    runs: list[datetime] = []
    if job.schedule.cron and job.status == JobStatus.ACTIVE:
        schedule = CronSchedule(job.schedule.cron, job.schedule.time_zone)
        start = next_run or now
        runs = ([next_run] if next_run else []) + schedule.runs(start, NEXT_RUNS_SHOWN - (1 if next_run else 0))
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
    return get_job(ports, owner, job_id)


def resume_job(ports: Ports, owner: str, job_id: str) -> JobView:
    """Active again: the waiting execution is dispatched, so missed slots follow the catch-up policy."""
    job = get_owned_job(ports, owner, job_id)
    if job.status == JobStatus.CANCELLED:
        raise Conflict("a cancelled job cannot be resumed", field="status")
    if job.status == JobStatus.PAUSED:
        now = ports.clock()
        job = ports.store.update_job_status(job, JobStatus.ACTIVE, now)
        waiting = [e for e in waiting_executions(ports, job_id) if e.due_at <= ports.dispatch_horizon(now)]
        if waiting:
            dispatch(ports, waiting, now)
    return get_job(ports, owner, job_id)


def cancel_job(ports: Ports, owner: str, job_id: str) -> None:
    """The job ends `cancelled`; its waiting executions end `cancelled`, a running one is fenced out."""
    job = get_owned_job(ports, owner, job_id)
    now = ports.clock()
    if job.status != JobStatus.CANCELLED:
        ports.store.update_job_status(job, JobStatus.CANCELLED, now)
    for execution in ports.store.iter_executions_of_job(job_id):
        key = ports.store.key_of(execution)
        if execution.status == ExecutionStatus.SCHEDULED:
            ports.store.end_waiting(key, ExecutionStatus.CANCELLED, now, "job cancelled")
        elif execution.status == ExecutionStatus.RUNNING:
            with contextlib.suppress(Conflict):  # it ended meanwhile
                ports.store.end_claimed(key, execution.attempt, ExecutionStatus.CANCELLED, now, "job cancelled")


def run_now(ports: Ports, owner: str, job_id: str) -> Execution:
    """An execution due now, outside the schedule; the schedule is not disturbed."""
    job = get_owned_job(ports, owner, job_id)
    if job.status != JobStatus.ACTIVE:
        raise Conflict(f"job is {job.status.value}; only an active job can run now", field="status")
    now = ports.clock()
    execution = new_execution(job, now, kind="manual")
    if not ports.store.put_execution(execution):
        raise Conflict("a run was requested at this same instant already")
    ports.queues.send([DueMessage.for_execution(execution, ports.store.key_of(execution))], now)
    return execution


def preview(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    """The next `count` run times of a schedule after `start`, by the cron rules of DESIGN.md."""
    if schedule.at is not None:
        return [schedule.at] if schedule.at > start else []
    assert schedule.cron is not None
    return CronSchedule(schedule.cron, schedule.time_zone).runs(start, count)
