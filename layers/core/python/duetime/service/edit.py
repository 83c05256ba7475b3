"""Edit a job in place: its spec changed under the version the client read, its waiting run replaced at once.

An edit that moves the job's timing (schedule, jitterSeconds, jobClass) replaces the job's waiting
first-attempt run of its schedule by the new schedule's first slot, in the one store transaction that
stores the job (Store.edit_job): the job never has no next run, nor two. Any other edit leaves the waiting
run alone (a claim reads handler, payload, retry and timeout from the job). What has started is not
touched: a running execution keeps the handler and payload it was claimed with, a waiting retry of it stays,
and both finish under the job's retry policy and timeout as they stand when read (at each claim, heartbeat
and completion). Run-now executions stay. The history keeps the job's id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from duetime.domain.bounds import first_run_number
from duetime.domain.destinations import check_destination_grants
from duetime.domain.errors import Conflict, InvalidInput
from duetime.domain.events import JobChange
from duetime.domain.models import (
    ENDED_JOB_STATUSES,
    Delivery,
    Execution,
    ExecutionStatus,
    Job,
    JobSpec,
    JobStatus,
)
from duetime.service.calendars import check_references
from duetime.service.context import Ports
from duetime.service.dispatch import dispatch, planned_run
from duetime.service.events import job_changed
from duetime.service.handlers import check_grant, check_handler
from duetime.service.jobs import JobView, anchored, get_job, get_owned_job, validate_spec, waiting_executions
from duetime.service.limits import check_reference as check_limit_reference

# The spec fields that decide when and where the job's next run is: changing one replaces its waiting run.
TIMING_FIELDS = frozenset({"schedule", "jitter_seconds", "job_class"})
EDITABLE_FIELDS = frozenset(JobSpec.model_fields)


def check_version(job: Job, version: int) -> None:
    """Raise Conflict naming `version` unless the job is still at the version the client read."""
    if job.version != version:
        raise Conflict(
            f"job {job.job_id} is at version {job.version}, not {version}: it changed since you read it; "
            "read it again and reapply your edit",
            field="version",
        )


def edited_spec(job: Job, changes: Mapping[str, Any]) -> JobSpec:
    """The job's spec with `changes` (spec field name -> new value, None clearing an optional field) applied,
    checked as a POST body is; raises InvalidInput naming the field (wire name) otherwise."""
    unknown = set(changes) - EDITABLE_FIELDS
    if unknown:
        raise InvalidInput(f"{sorted(unknown)[0]} cannot be edited", field=sorted(unknown)[0])
    values = job.model_dump(include=set(EDITABLE_FIELDS), by_alias=True)
    for name, value in changes.items():
        alias = JobSpec.model_fields[name].alias or name
        values[alias] = value.model_dump(by_alias=True, exclude_unset=True) if isinstance(value, BaseModel) else value
    if values.get("delivery") == Delivery.AT_MOST_ONCE and "retry" not in changes:
        # Made at-most-once without a retry policy: no retries, as at creation (check_delivery).
        values["retry"] = {**values["retry"], "maxAttempts": 1}
    try:
        return JobSpec.model_validate(values, by_alias=True, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "body"
        raise InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field) from exc


def edit_job(
    ports: Ports,
    owner: str,
    job_id: str,
    version: int,
    changes: Mapping[str, Any],
    groups: Sequence[str] = (),
) -> JobView:
    """Apply `changes` to the owner's job if it is still at `version`; returns the job as edited.

    Raises NotFound for another owner's job, Conflict naming `version` on a lost update and naming `status`
    for an ended job or a one-off whose run has started, InvalidInput naming the field as at POST, Forbidden
    for a handler or failure destination outside the grants of the owner and the caller's current `groups`
    (checked on every edit; the job keeps these groups for the claim's check). Quotas are untouched.
    """
    job = get_owned_job(ports, owner, job_id)
    check_version(job, version)
    if job.status in ENDED_JOB_STATUSES:
        raise Conflict(f"a {job.status.value} job cannot be edited", field="status")
    now = ports.clock()
    spec = edited_spec(job, changes)
    if "job_class" in changes and "timeout_seconds" not in changes:
        # The stored timeout stays if the new class can run it; otherwise it becomes that class's longest.
        job_class = ports.settings.job_classes.get(spec.job_class)
        if job_class is not None and spec.timeout_seconds > job_class.max_timeout_seconds:
            spec = spec.model_copy(update={"timeout_seconds": job_class.max_timeout_seconds})
    retimed = bool(TIMING_FIELDS & set(changes))
    spec, first_slot = validate_spec(ports, spec, now)
    slot = first_slot if retimed else None
    # The caller's current groups, on every edit: a member removed from a group edits nothing its grant gave.
    if {"handler", "job_class"} & set(changes):
        check_handler(ports, owner, groups, spec.handler, spec.job_class)
    else:
        check_grant(ports, owner, groups, spec.handler)
    check_destination_grants(spec.notify, ports.grants, owner, groups)
    if "exclude" in changes:
        check_references(ports, owner, spec.exclude)
    if "rate_limit" in changes:
        check_limit_reference(ports, owner, spec.rate_limit)
    if "schedule" in changes:
        spec = anchored(spec, now)  # a new interval without startAt counts from the edit
    edited = Job(
        **spec.model_dump(),
        job_id=job.job_id,
        owner=job.owner,
        owner_groups=list(groups),  # the claim's grant check follows the groups of the last create or edit
        status=job.status,
        note=job.note,
        created_at=job.created_at,
        updated_at=now,
        version=job.version + 1,
    )
    first: Execution | None = None
    replaced: list[Execution] = []
    if retimed:
        # Its running runs are of the old timing: a claim of the new one finds them by the index, not by slot.
        for running in ports.store.open_executions_of_job(job_id):
            if running.status == ExecutionStatus.RUNNING:
                ports.store.index_by_job(ports.store.key_of(running))
    if slot is not None:
        # Only the schedule's own waiting run is replaced: retries of a started run and run-nows stay.
        replaced = [e for e in waiting_executions(ports, job_id) if e.kind == "scheduled" and e.attempt == 0]
        if not replaced and job.schedule.at is not None:
            raise Conflict("this one-off job has run already; submit a new job to run it again", field="status")
        first = planned_run(ports, edited, slot, first_run_number(edited.schedule), now)
    ports.store.edit_job(edited, [ports.store.key_of(e) for e in replaced], first)
    job_changed(ports, edited, JobChange.EDITED, now)
    if first is not None:
        if edited.status == JobStatus.PAUSED:
            ports.store.hold_waiting(ports.store.key_of(first))  # as pause leaves its waiting run
        elif first.due_at <= ports.dispatch_horizon(now):
            dispatch(ports, [first], now, known_jobs={job_id: edited})
    return get_job(ports, owner, job_id)
