"""Job use-cases: submit, read, list, pause, resume, cancel, run now, history and schedule preview."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.definitions import HEALTH_HISTORY_ROWS, LONG_JOB_CLASS, PAST_DUE_GRACE_SECONDS
from duetime.domain.bounds import first_bounded_slot, first_run_number
from duetime.domain.catchup import MIN_CATCH_UP_ALL_PERIOD_SECONDS
from duetime.domain.cron import load_zone
from duetime.domain.destinations import check_destination_grants, check_webhook_destinations
from duetime.domain.errors import Conflict, IdempotencyMismatch, InvalidInput, InvalidSchedule, NotFound
from duetime.domain.events import JobChange
from duetime.domain.exclusions import Calendar, Exclusions, check_bounded_entries
from duetime.domain.horizon import HORIZON_RULE, within_horizon
from duetime.domain.keys import in_key_range, new_job_id
from duetime.domain.models import (
    EPOCH,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    TAG_KEY,
    CatchUp,
    Delivery,
    Execution,
    ExecutionStatus,
    Job,
    JobSpec,
    JobStatus,
    Schedule,
    whole_ms,
)
from duetime.domain.quotas import JOB_CREATES_PER_MINUTE, RUN_NOWS_PER_MINUTE, RateWindow, rate_window
from duetime.domain.recurrence import included_runs, next_included, recurrence_of
from duetime.domain.spread import spread_due
from duetime.domain.webhooks import is_webhook, parse_webhook_url
from duetime.service.calendars import CalendarCache, check_references
from duetime.service.context import Ports
from duetime.service.dispatch import dispatch, new_execution, planned_run
from duetime.service.events import job_changed
from duetime.service.handlers import check_grant, check_handler
from duetime.service.job_ends import release_held
from duetime.service.lateness import WithinBudget, within_budget
from duetime.service.limits import check_reference as check_limit_reference
from duetime.service.ports import DueMessage, JobFilter, NewJob

MAX_AT_AHEAD = timedelta(days=366)
# A one-off in the past runs at once; further back than this it is a mistake (a 1969 date would give an
# id no parser accepts).
MAX_AT_BEHIND = timedelta(days=366)
IDEMPOTENCY_TTL = timedelta(hours=24)
MAX_HANDLER_CHARS = 256  # as JobSpec.handler
NEXT_RUNS_SHOWN = 5
# What the jobs list reads of each job's history for its last run: its newest few executions.
LIST_HISTORY_ROWS = 5
# jitterSeconds and catchUp `all` are checked against a cron's shortest gap among this many slots from now.
JITTER_PERIOD_SLOTS = 50
_CRON_PROBE = datetime(2026, 1, 1, tzinfo=UTC)  # a fixed start: the same spec always gets the same verdict


@dataclass(frozen=True)
class Health:
    """How a job's schedule fares, derived at read time from its newest executions and its open rows:
    the last run that started, the last success and failure among the newest HEALTH_HISTORY_ROWS
    executions, and the waiting run overdue by more than PAST_DUE_GRACE_SECONDS if any."""

    last_run: Execution | None = None
    last_success: Execution | None = None
    last_failure: Execution | None = None
    past_due: Execution | None = None
    # With a lateAfterSeconds: the share of runs started within it over the last 7 and 30 days.
    within_budget: tuple[WithinBudget, ...] = ()


@dataclass(frozen=True)
class JobView:
    job: Job
    next_runs: list[datetime]
    health: Health | None = None


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
            + (f"; use jobClass {LONG_JOB_CLASS!r} for longer jobs" if spec.job_class != LONG_JOB_CLASS else ""),
            field="timeoutSeconds",
        )
    if is_webhook(spec.handler):
        parse_webhook_url(spec.handler, ports.settings.allow_loopback_webhooks)  # DNS is checked at each call
    check_webhook_destinations(spec.notify, ports.settings.allow_loopback_webhooks)
    if spec.exclude and not spec.schedule.is_recurring:
        raise InvalidInput("exclude applies to 'cron' and 'every' schedules; an 'at' job runs once", field="exclude")
    try:
        check_bounded_entries(spec.exclude)
    except ValueError as exc:
        raise InvalidInput(f"exclude: {exc}", field="exclude") from exc
    spec = check_delivery(spec)
    if spec.retry.max_delay_seconds < spec.retry.base_delay_seconds:
        raise InvalidInput("retry.maxDelaySeconds must be at least baseDelaySeconds", field="retry.maxDelaySeconds")
    check_bounds(spec.schedule)
    slot = first_slot(spec.schedule, now)
    if spec.schedule.end_at is not None and slot > spec.schedule.end_at:
        raise InvalidInput("schedule.endAt is before the schedule's first run", field="schedule.endAt")
    check_jitter(spec)
    check_catch_up(spec)
    return spec, slot


def check_delivery(spec: JobSpec) -> JobSpec:
    """An at-most-once job runs each slot once at most, so it has no retries: an unset retry policy becomes
    maxAttempts 1; a retry.maxAttempts above 1 given with it is refused (InvalidInput naming the field)."""
    if spec.delivery != Delivery.AT_MOST_ONCE or spec.retry.max_attempts == 1:
        return spec
    if "retry" not in spec.model_fields_set:
        return spec.model_copy(update={"retry": spec.retry.model_copy(update={"max_attempts": 1})})
    raise InvalidInput(
        f"retry.maxAttempts {spec.retry.max_attempts} starts a slot again; an at-most-once job (delivery) has "
        "maxAttempts 1",
        field="retry.maxAttempts",
    )


def check_bounds(schedule: Schedule) -> None:
    """startAt, endAt and maxRuns bound a repeating schedule; a one-off `at` has none (InvalidInput naming it)."""
    if schedule.at is not None:
        for name, value in (("startAt", schedule.start_at), ("endAt", schedule.end_at), ("maxRuns", schedule.max_runs)):
            if value is not None:
                raise InvalidInput(
                    f"schedule.{name} bounds 'cron' and 'every' schedules; 'at' runs once", field=f"schedule.{name}"
                )
    for name, value in (("at", schedule.at), ("startAt", schedule.start_at), ("endAt", schedule.end_at)):
        if value is not None and not within_horizon(value):
            raise InvalidInput(f"schedule.{name} is out of range: {HORIZON_RULE}", field=f"schedule.{name}")
    if schedule.start_at is not None and schedule.end_at is not None and schedule.end_at < schedule.start_at:
        raise InvalidInput("schedule.endAt is before schedule.startAt", field="schedule.endAt")


def shortest_period(schedule: Schedule) -> timedelta | None:
    """A repeating schedule's shortest gap between slots: an interval's period; a cron's shortest gap over
    JITTER_PERIOD_SLOTS slots from a fixed date (the same spec always gets the same verdict). None for `at`."""
    recurrence = recurrence_of(schedule, created_at=EPOCH)
    if recurrence is None:
        return None
    slots = recurrence.runs(EPOCH if schedule.every is not None else _CRON_PROBE, JITTER_PERIOD_SLOTS)
    return min(b - a for a, b in itertools.pairwise(slots))


def check_catch_up(spec: JobSpec) -> None:
    """catchUp `all` needs slots at least MIN_CATCH_UP_ALL_PERIOD_SECONDS apart (domain.catchup says why):
    for a seconds schedule it is refused (InvalidInput naming catchUp), `latest` or `none` offered instead."""
    if spec.catch_up != CatchUp.ALL:
        return
    period = shortest_period(spec.schedule)
    if period is not None and period.total_seconds() < MIN_CATCH_UP_ALL_PERIOD_SECONDS:
        raise InvalidInput(
            f"catchUp 'all' needs slots at least {MIN_CATCH_UP_ALL_PERIOD_SECONDS} s apart, and this schedule's are "
            f"{period.total_seconds():g} s apart: its missed slots would run one after another behind its own "
            "runs and never catch up; use catchUp 'latest' (the most recent missed slot runs) or 'none'",
            field="catchUp",
        )


def check_jitter(spec: JobSpec) -> None:
    """jitterSeconds must stay below the schedule's shortest period, so a run is due before the next slot."""
    if spec.jitter_seconds == 0:
        return
    period = shortest_period(spec.schedule)
    if period is None:
        return
    if spec.jitter_seconds >= period.total_seconds():
        raise InvalidInput(
            f"jitterSeconds {spec.jitter_seconds} must be less than the schedule's shortest period "
            f"({int(period.total_seconds())} s)",
            field="jitterSeconds",
        )


def first_slot(schedule: Schedule, now: datetime) -> datetime:
    if schedule.at is not None:
        load_zone(schedule.time_zone)  # unused by `at`, but an unknown zone is still a mistake to report
        if schedule.at - now > MAX_AT_AHEAD:
            raise InvalidSchedule("schedule.at is more than a year ahead", field="schedule.at")
        if now - schedule.at > MAX_AT_BEHIND or not in_key_range(schedule.at):
            raise InvalidSchedule("schedule.at is more than a year ago", field="schedule.at")
        # In whole milliseconds, as the job stores `at`: the run's id and key then follow from the stored job
        # (domain/history.py), where a rounded microsecond put it a millisecond after.
        return whole_ms(schedule.at)
    if schedule.every is not None:
        load_zone(schedule.time_zone)  # intervals are elapsed time, but an unknown zone is still a mistake
        # Anchored where `anchored` anchors the stored job: its start, or its creation, in whole milliseconds
        schedule = schedule.model_copy(update={"start_at": whole_ms(schedule.start_at or now)})
    recurrence = recurrence_of(schedule, created_at=now)
    assert recurrence is not None
    return first_bounded_slot(recurrence, schedule, now)


def anchored(spec: JobSpec, now: datetime) -> JobSpec:
    """The spec with an interval's `startAt` set (its creation time when unset), so its slots never move.

    The anchor is whole milliseconds, as every time is stored and answered: an anchor with microseconds put a
    2-second interval's slots (rounded to the millisecond in their rows) a millisecond off the `nextRunAt` and
    `startAt` the API answered (truncated)."""
    if spec.schedule.every is None:
        return spec
    start = whole_ms(spec.schedule.start_at or now)
    if start == spec.schedule.start_at:
        return spec
    return spec.model_copy(update={"schedule": spec.schedule.model_copy(update={"start_at": start})})


def body_hash(spec: JobSpec) -> str:
    return hashlib.sha256(spec.model_dump_json(by_alias=True).encode()).hexdigest()


@dataclass(frozen=True)
class PreparedJob:
    """A checked job ready to write (`new`), with its idempotency record's key and body hash when given."""

    new: NewJob
    idem_key: str | None
    digest: str


def idempotency_record_key(owner: str, idempotency_key: str) -> str:
    """The control record an owner's Idempotency-Key is kept in."""
    return f"idem#{owner}#{idempotency_key}"


def prepare_job(
    ports: Ports,
    owner: str,
    spec: JobSpec,
    idempotency_key: str | None,
    groups: Sequence[str],
    now: datetime,
    records: Mapping[str, dict[str, Any]] | None = None,
) -> Job | PreparedJob:
    """Check `spec` as POST /jobs does (InvalidInput, Forbidden, IdempotencyMismatch naming the field); the
    job a replayed Idempotency-Key names, else the job, its first execution and its key's record to write.
    `records`: the key records read already (a batch reads its keys at once), else the key's is read here."""
    spec, slot = validate_spec(ports, spec, now)
    check_handler(ports, owner, groups, spec.handler, spec.job_class)
    check_destination_grants(spec.notify, ports.grants, owner, groups)
    check_references(ports, owner, spec.exclude)
    check_limit_reference(ports, owner, spec.rate_limit)
    idem_key = idempotency_record_key(owner, idempotency_key) if idempotency_key else None
    digest = body_hash(spec) if idem_key else ""  # a serialization of the spec only when a key is given
    if idem_key:
        record = records.get(idem_key) if records is not None else ports.store.get_control(idem_key)
        existing = _replayed_job(ports, owner, record, digest)
        if existing:
            return existing
    job = Job(
        **anchored(spec, now).model_dump(),
        job_id=new_job_id(ports.id_hex()),
        owner=owner,
        owner_groups=list(groups),
        created_at=now,
        updated_at=now,
    )
    first = planned_run(ports, job, slot, first_run_number(job.schedule), now)
    idempotency = None
    if idem_key:
        expires = int((now + IDEMPOTENCY_TTL).timestamp())
        idempotency = {"key": idem_key, "bodyHash": digest, "expiresAt": expires}
    return PreparedJob(NewJob(job, first, idempotency), idem_key, digest)


def creation_rate(ports: Ports, owner: str, now: datetime) -> RateWindow | None:
    """The owner's jobCreatesPerMinute window at `now`, if it has that quota."""
    limit = ports.quotas.job_creates_per_minute
    return None if limit is None else rate_window(owner, JOB_CREATES_PER_MINUTE, limit, now)


def replay_after_conflict(ports: Ports, owner: str, prepared: PreparedJob) -> Job | None:
    """After a Conflict on writing `prepared`: the job a concurrent duplicate of its key created, if any."""
    if prepared.idem_key is None:
        return None
    return _idempotent_replay(ports, owner, prepared.idem_key, prepared.digest)


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
    job class's workers, else InvalidInput listing what is served; both name the field `handler`. Each
    failure destination must be granted too, else Forbidden naming it (`notify.onFailure[i].webhook`...).
    An owner at its activeJobs or jobCreatesPerMinute quota (ports.quotas) gets QuotaExceeded naming it.
    """
    now = ports.clock()
    prepared = prepare_job(ports, owner, spec, idempotency_key, groups, now)
    if isinstance(prepared, Job):
        return prepared, False
    job, first = prepared.new.job, prepared.new.first
    assert first is not None
    try:
        # The owner's counters are charged in the job's own transaction: a replay or a refused job costs none.
        # A first run due within the horizon is sent in the same commit where the store and the queues share
        # a database (SQLite): one wait for the write lock a job, not two, beside the workers' writes.
        with ports.store.batched():
            ports.store.create_job(
                job, first, prepared.new.idempotency, ports.quotas.max_active_jobs, creation_rate(ports, owner, now)
            )
            if first.due_at <= ports.dispatch_horizon(now):
                dispatch(ports, [first], now, known_jobs={job.job_id: job})
    except Conflict:
        existing = replay_after_conflict(ports, owner, prepared)
        if existing:
            return existing, False
        raise
    job_changed(ports, job, JobChange.CREATED, now)
    return job.model_copy(update={"next_run_at": first.due_at}), True


def _idempotent_replay(ports: Ports, owner: str, idem_key: str, digest: str) -> Job | None:
    return _replayed_job(ports, owner, ports.store.get_control(idem_key), digest)


def _replayed_job(ports: Ports, owner: str, record: Mapping[str, Any] | None, digest: str) -> Job | None:
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
    """The job with nextRunAt (its earliest waiting execution), for cron jobs the next few runs, and its
    schedule's health (one bounded query of its newest executions; nothing is written per run for it)."""
    job = get_owned_job(ports, owner, job_id)
    waiting = waiting_executions(ports, job_id) if job.status != JobStatus.CANCELLED else []
    now = ports.clock()
    first = waiting[0] if waiting else None
    calendars = CalendarCache(ports).of(job)
    view = describe(job, first.due_at if first else None, now, calendars, first.run_number if first else None)
    recent = ports.store.executions_of_job(job_id, newest_first=True, limit=HEALTH_HISTORY_ROWS)
    health = replace(health_of(job, recent, waiting, now), within_budget=tuple(within_budget(ports, job, now)))
    return replace(view, health=health)


def health_of(job: Job, recent: Sequence[Execution], waiting: Sequence[Execution], now: datetime) -> Health:
    """The health of `job` from its `recent` executions (newest first) and its `waiting` ones."""
    started = [e for e in recent if e.started_at is not None]
    grace = timedelta(seconds=PAST_DUE_GRACE_SECONDS)
    overdue = job.status == JobStatus.ACTIVE and waiting and waiting[0].due_at + grace < now
    return Health(
        last_run=max(started, key=lambda e: e.started_at or now, default=None),
        last_success=next((e for e in recent if e.status == ExecutionStatus.SUCCEEDED), None),
        last_failure=next((e for e in recent if e.status == ExecutionStatus.FAILED), None),
        past_due=waiting[0] if overdue else None,
    )


def describe(
    job: Job,
    next_run: datetime | None,
    now: datetime,
    calendars: Mapping[str, Calendar] | None = None,
    next_number: int | None = None,
) -> JobView:
    """The view of a job whose earliest waiting execution is due at `next_run` (a new job's is its first
    slot, so creating one needs no read back); `calendars` are its owner's, if it names any."""
    runs: list[datetime] = []
    schedule = recurrence_of(job.schedule, job.created_at)
    if schedule is not None and job.status == JobStatus.ACTIVE:
        # Slots past endAt are not shown, nor past maxRuns (counted from the waiting row's runNumber).
        exclusions = Exclusions(job.exclude, job.schedule.time_zone, calendars)
        none_left = False
        if next_run is not None and exclusions.excludes(next_run):
            # The waiting slot is on an excluded date: it will be recorded skipped, not run.
            included = next_included(schedule, exclusions, next_run)
            # None: every slot up to the horizon is excluded (dispatch pauses the job): nothing to show.
            none_left = included is None
            next_run = None if included is None else spread_due(job.job_id, included, job.jitter_seconds)
        start = next_run or now
        shown = 0 if none_left else NEXT_RUNS_SHOWN - (1 if next_run else 0)
        later = included_runs(schedule, exclusions, start, shown)
        later = [slot for slot in later if job.schedule.end_at is None or slot <= job.schedule.end_at]
        # Each shown as when it is due: its slot plus the job's spread (as nextRunAt is).
        runs = ([next_run] if next_run else []) + [spread_due(job.job_id, s, job.jitter_seconds) for s in later]
        if job.schedule.max_runs is not None and next_number is not None:
            runs = runs[: max(0, job.schedule.max_runs - next_number + 1)]
    elif next_run:
        runs = [next_run]
    return JobView(job=job.model_copy(update={"next_run_at": next_run}), next_runs=runs)


def list_jobs(
    ports: Ports, owner: str, limit: int, cursor: str | None, filters: JobFilter | None = None
) -> tuple[list[Job], str | None]:
    """The owner's jobs, newest first, narrowed by `filters` in the store (within the owner's partition);
    raises InvalidInput naming `cursor` for one not of this owner."""
    page = (
        ports.store.list_jobs(owner, limit, cursor, filters)
        if filters and not filters.is_empty
        else (ports.store.list_jobs(owner, limit, cursor))
    )
    return page.items, page.cursor


def list_job_views(
    ports: Ports, owner: str, limit: int, cursor: str | None, filters: JobFilter | None = None
) -> tuple[list[JobView], str | None]:
    """The owner's jobs as list_jobs gives them, each with nextRunAt (its earliest waiting run, as GET
    /jobs/{jobId} shows it), its last run that started and a past-due run: two bounded reads a job (its open
    rows and its newest LIST_HISTORY_ROWS executions) inside this one request, so a list page needs no
    request per job."""
    jobs, next_cursor = list_jobs(ports, owner, limit, cursor, filters)
    calendars = CalendarCache(ports)
    now = ports.clock()
    views = []
    for job in jobs:
        waiting = waiting_executions(ports, job.job_id) if job.status != JobStatus.CANCELLED else []
        first = waiting[0] if waiting else None
        view = describe(
            job, first.due_at if first else None, now, calendars.of(job), first.run_number if first else None
        )
        recent = ports.store.executions_of_job(job.job_id, newest_first=True, limit=LIST_HISTORY_ROWS)
        health = health_of(job, recent, waiting, now)
        # Success and failure are looked for among a few rows only here: the list leaves them to GET /jobs/{id}.
        views.append(replace(view, next_runs=[], health=Health(last_run=health.last_run, past_due=health.past_due)))
    return views, next_cursor


def job_filter(status: str | None, handler: str | None, tags: Sequence[str]) -> JobFilter:
    """GET /jobs's filters from its query values: `status` one of JobStatus, `handler` a name, each `tag`
    "key:value" (the key as tags allow). Raises InvalidInput naming the parameter."""
    job_status = None
    if status is not None:
        try:
            job_status = JobStatus(status)
        except ValueError:
            known = ", ".join(s.value for s in JobStatus)
            raise InvalidInput(f"status must be one of {known}", field="status") from None
    if handler is not None and not 1 <= len(handler) <= MAX_HANDLER_CHARS:
        raise InvalidInput(f"handler must be 1 to {MAX_HANDLER_CHARS} characters", field="handler")
    pairs: list[tuple[str, str]] = []
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"at most {MAX_TAGS} tag filters are allowed", field="tag")
    for tag in tags:
        key, sep, value = tag.partition(":")
        if not sep or not TAG_KEY.fullmatch(key) or len(value) > MAX_TAG_VALUE_CHARS:
            raise InvalidInput("tag must be key:value, the key of A-Z a-z 0-9 _ . / - (64 at most)", field="tag")
        pairs.append((key, value))
    return JobFilter(status=job_status, handler=handler, tags=tuple(pairs))


def list_executions(
    ports: Ports, owner: str, job_id: str, limit: int, cursor: str | None
) -> tuple[list[Execution], str | None]:
    """The job's executions, newest first; raises NotFound for another owner's job, InvalidInput naming
    `cursor` for a cursor of another job."""
    get_owned_job(ports, owner, job_id)
    page = ports.store.list_executions(job_id, limit, cursor)
    return page.items, page.cursor


def pause_job(ports: Ports, owner: str, job_id: str, note: str | None = None) -> JobView:
    """No new runs start; the waiting execution stays waiting (and is not run if already queued). The
    `note` (why) is stored on the job; pausing a paused job replaces its note only if one is given."""
    pause(ports, get_owned_job(ports, owner, job_id), note)
    return get_job(ports, owner, job_id)


def pause(ports: Ports, job: Job, note: str | None = None) -> bool:
    """pause_job's change of a job read (the write conditioned on its version); True if it was active."""
    if job.status in (JobStatus.CANCELLED, JobStatus.COMPLETED):
        raise Conflict(f"a {job.status.value} job cannot be paused", field="status")
    if job.status == JobStatus.PAUSED and note is not None:
        ports.store.update_job_status(job, JobStatus.PAUSED, ports.clock(), note)
    if job.status != JobStatus.ACTIVE:
        return False
    job_changed(ports, ports.store.update_job_status(job, JobStatus.PAUSED, ports.clock(), note), JobChange.PAUSED)
    # Held rows leave the reconciler's `open` index: a pause costs it nothing per cycle. One that a
    # concurrent dispatch creates meanwhile is held by the reconciler when it first finds it.
    for execution in waiting_executions(ports, job.job_id):
        ports.store.hold_waiting(ports.store.key_of(execution))
    return True


def resume_job(ports: Ports, owner: str, job_id: str, note: str | None = None, groups: Sequence[str] = ()) -> JobView:
    """Active again: the waiting execution is dispatched, so missed slots follow the catch-up policy. The
    pause's note gives way to `note` (none: cleared). The owner or the caller's current `groups` must be
    granted the job's handler (Forbidden naming `handler`); a pause needs no grant."""
    resume(ports, get_owned_job(ports, owner, job_id), note, groups)
    return get_job(ports, owner, job_id)


def resume(ports: Ports, job: Job, note: str | None = None, groups: Sequence[str] = ()) -> bool:
    """resume_job's change of a job read (the grant checked against `groups`, the write conditioned on its
    version); True if it was paused."""
    check_grant(ports, job.owner, groups, job.handler)
    if job.status in (JobStatus.CANCELLED, JobStatus.COMPLETED):
        raise Conflict(f"a {job.status.value} job cannot be resumed", field="status")
    if job.status != JobStatus.PAUSED:
        return False
    now = ports.clock()
    # Back where the reconciler looks before the job is active again: a resume that dies between the two
    # leaves a paused job whose rows the reconciler holds again (and the resume can be retried), never an
    # active job with a waiting row nothing finds.
    held = release_held(ports, job)
    job = ports.store.update_job_status(job, JobStatus.ACTIVE, now, note)
    job_changed(ports, job, JobChange.RESUMED, now)
    waiting = [e for e in held if e.due_at <= ports.dispatch_horizon(now)]
    if waiting:
        dispatch(ports, waiting, now, known_jobs={job.job_id: job})
    return True


def cancel_job(ports: Ports, owner: str, job_id: str) -> None:
    """The job ends `cancelled`; its waiting executions end `cancelled`, a running one is fenced out.

    Only the job's open rows are read (the `openByJob` index, and on DynamoDB its rows due after the sweep's
    bound), so the work is bounded by what is open and the last minutes, never by the job's history.
    """
    cancel(ports, get_owned_job(ports, owner, job_id))


def cancel(ports: Ports, job: Job) -> bool:
    """cancel_job's change of a job read (the write conditioned on its version); True if it was not
    cancelled yet (its open rows are ended either way)."""
    now = ports.clock()
    # A paused job's held rows go back where the reconciler looks first: a cancel that dies after the job's
    # write leaves them where the reconciler finds and ends them, never waiting out of sight for good.
    release_held(ports, job)
    changed = job.status != JobStatus.CANCELLED
    if changed:
        job_changed(ports, ports.store.update_job_status(job, JobStatus.CANCELLED, now), JobChange.CANCELLED, now)
    for execution in ports.store.open_executions_of_job(job.job_id):
        key = ports.store.key_of(execution)
        if execution.status == ExecutionStatus.SCHEDULED:
            ports.store.end_waiting(key, ExecutionStatus.CANCELLED, now, "job cancelled")
        elif execution.status == ExecutionStatus.RUNNING:
            with contextlib.suppress(Conflict):  # it ended meanwhile
                ports.store.end_claimed(key, execution.attempt, ExecutionStatus.CANCELLED, now, "job cancelled")
    return changed


def run_now(
    ports: Ports, owner: str, job_id: str, payload: dict[str, Any] | None = None, groups: Sequence[str] = ()
) -> Execution:
    """An execution due now, outside the schedule; the schedule is not disturbed. A `payload` replaces the
    job's for this execution only (stored on its row). Raises Forbidden (field `handler`) unless the owner
    or the caller's current `groups` are granted the job's handler, QuotaExceeded past the owner's
    runNowsPerMinute."""
    job = get_owned_job(ports, owner, job_id)
    check_grant(ports, owner, groups, job.handler)
    if job.status != JobStatus.ACTIVE:
        raise Conflict(f"job is {job.status.value}; only an active job can run now", field="status")
    if payload is not None and job.handler.startswith("ecs:"):
        # An ecs: task reads its job's payload itself (duetime.ecs_task), never from the task's environment,
        # where DescribeTasks and CloudTrail would show it; a payload of one run only is out of its reach.
        raise InvalidInput("an ecs: job runs with its own payload; run it now without one", field="payload")
    now = ports.clock()
    if ports.quotas.run_nows_per_minute is not None:
        ports.store.count_request(rate_window(owner, RUN_NOWS_PER_MINUTE, ports.quotas.run_nows_per_minute, now))
    execution = new_execution(job, now, kind="manual").model_copy(update={"payload": payload})
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
    runs = included_runs(recurrence, Exclusions(exclude, schedule.time_zone, calendars), start, count)
    if schedule.max_runs is not None:
        runs = runs[: schedule.max_runs]  # counted from `start`, as for a job submitted then
    return [r for r in runs if schedule.end_at is None or r <= schedule.end_at]


def preview_due(job_id: str, jitter_seconds: int, runs: Sequence[datetime]) -> list[datetime]:
    """When each run of `runs` is due for the job `job_id` spread over `jitter_seconds` (domain.spread)."""
    return [spread_due(job_id, slot, jitter_seconds) for slot in runs]
