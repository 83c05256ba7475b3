"""Bulk actions: pause, resume or cancel many of an owner's jobs, by ids or by GET /jobs's filters.

Each job is changed exactly as its single-job route changes it (service.jobs pause, resume, cancel: the
write conditioned on the version read, its event, held rows on pause, the grant of the caller's current
groups on resume), and one that cannot be is reported with the error it would answer alone while the others
go on. The work of a request is bounded: at most MAX_BULK jobs by ids, or one page of at most `limit`
listed jobs by filter, whose `next_cursor` the next request goes on from. A dry run changes nothing and
answers how many jobs the action would change and the first of their ids, counting at most
DRY_RUN_PAGES pages of the listing (its `next_cursor` says where a count that stopped there goes on).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, get_args

from duetime.definitions import MAX_BULK
from duetime.domain.errors import DuetimeError, InvalidInput, NotFound
from duetime.domain.keys import JOB_ID_PATTERN
from duetime.domain.models import Job, JobStatus
from duetime.service import jobs as job_cases
from duetime.service.context import Ports
from duetime.service.edit import check_version
from duetime.service.ports import JobFilter

_JOB_ID = re.compile(JOB_ID_PATTERN)

BulkAction = Literal["pause", "resume", "cancel"]
BULK_ACTIONS: tuple[BulkAction, ...] = get_args(BulkAction)
# A dry run answers this many of the ids it counted.
DRY_RUN_IDS = 20
# A dry run lists at most this many pages of MAX_BULK jobs (its count says so when it stopped there).
DRY_RUN_PAGES = 10

# The statuses a filtered action changes: the others match nothing (a paused job needs no pause, an ended one
# can be neither paused nor resumed, and cancelling a completed one would change nothing but its word).
_CHANGES: dict[BulkAction, tuple[JobStatus, ...]] = {
    "pause": (JobStatus.ACTIVE,),
    "resume": (JobStatus.PAUSED,),
    "cancel": (JobStatus.ACTIVE, JobStatus.PAUSED),
}


@dataclass(frozen=True)
class BulkFailure:
    """A job the action did not change, and why (the error its single-job route answers)."""

    job_id: str
    code: str
    message: str


@dataclass
class BulkReport:
    """What a bulk request did, or for a dry run would do.

    `matched`: the jobs selected (a dry run: every one it counted, `first_ids` the first of them); `changed`
    the jobs whose status the action changed, `unchanged` those already in the state it gives (by ids only),
    `failed` the others; `next_cursor`: where a filtered request goes on (None: nothing is left)."""

    action: BulkAction
    dry_run: bool
    matched: int = 0
    first_ids: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[BulkFailure] = field(default_factory=list)
    next_cursor: str | None = None


def bulk_change(
    ports: Ports,
    owner: str,
    action: BulkAction,
    *,
    job_ids: Sequence[str] | None = None,
    selection: JobFilter | None = None,
    dry_run: bool = False,
    limit: int = MAX_BULK,
    cursor: str | None = None,
    note: str | None = None,
    groups: Sequence[str] = (),
    versions: Mapping[str, int] | None = None,
) -> BulkReport:
    """Apply `action` to the owner's jobs named in `job_ids`, or to those matching `selection` among the next
    `limit` listed from `cursor` (one of the two). `groups`: the caller's current groups, which a resume
    checks the job's handler against; `note`: stored with a pause or resume, as PATCH's; `versions`: for
    jobs named by id, the version each was read at (a job at another is reported as PATCH answers it: 409
    naming `version`), as PATCH's optional `version`. Raises InvalidInput
    naming the field for a request that selects wrongly; a job that cannot be changed is reported."""
    if action not in BULK_ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(BULK_ACTIONS)}", field="action")
    if (job_ids is None) == (selection is None):
        raise InvalidInput("give either jobIds or a filter", field="filter")
    if not 1 <= limit <= MAX_BULK:
        raise InvalidInput(f"limit must be 1..{MAX_BULK}", field="limit")
    if note is not None and action == "cancel":
        raise InvalidInput("a note goes with a pause or a resume, not a cancel", field="note")
    report = BulkReport(action, dry_run)
    change = _change(ports, action, note, groups)
    if job_ids is not None:
        if cursor is not None:
            raise InvalidInput("a cursor goes on through a filter's listing, not through jobIds", field="cursor")
        if len(job_ids) > MAX_BULK:
            raise InvalidInput(f"at most {MAX_BULK} jobIds per request", field="jobIds")
        unnamed = sorted(set(versions or {}) - set(job_ids))
        if unnamed:
            raise InvalidInput(f"versions names {unnamed[0][:80]!r}, which jobIds does not", field="versions")
        named = list(dict.fromkeys(job_ids))  # each once, in the order given
        if dry_run:  # count those the action changes, as a filter's dry run does; report those not found
            return _count_named(ports, owner, action, named, report)
        report.matched = len(named)
        for job_id in named:
            version = (versions or {}).get(job_id)
            _apply(report, job_id, partial(_owned_change, change, ports, owner, job_id, version))
        return report
    assert selection is not None
    if dry_run:
        return _count(ports, owner, action, selection, report, cursor)
    jobs, report.next_cursor = job_cases.list_jobs(ports, owner, limit, cursor, selection)
    for job in jobs:
        if job.status in _CHANGES[action]:
            report.matched += 1
            _apply(report, job.job_id, partial(change, job))
    return report


def _change(ports: Ports, action: BulkAction, note: str | None, groups: Sequence[str]) -> Callable[[Job], bool]:
    """The single-job change of `action`, over a job read: True if the job's status changed."""
    if action == "pause":
        return lambda job: job_cases.pause(ports, job, note)
    if action == "resume":
        return lambda job: job_cases.resume(ports, job, note, groups)
    return lambda job: job_cases.cancel(ports, job)


def _owned_change(change: Callable[[Job], bool], ports: Ports, owner: str, job_id: str, version: int | None) -> bool:
    """`change` of the owner's job by id, if it is still at `version` when one is given."""
    job = _owned(ports, owner, job_id)
    if version is not None:
        check_version(job, version)
    return change(job)


def _owned(ports: Ports, owner: str, job_id: str) -> Job:
    """The owner's job by id; a string no job id can be is NotFound, as on the single-job routes."""
    if not _JOB_ID.fullmatch(job_id):
        raise NotFound(f"job {job_id[:80]!r} not found", field="jobId")
    return job_cases.get_owned_job(ports, owner, job_id)


def _count_named(ports: Ports, owner: str, action: BulkAction, named: Sequence[str], report: BulkReport) -> BulkReport:
    """A dry run by ids: each job read once; those the action changes counted, the ids that name none of the
    owner's jobs reported as failed, as the run would report them."""
    for job_id in named:
        try:
            job = _owned(ports, owner, job_id)
        except DuetimeError as exc:
            report.failed.append(BulkFailure(job_id, exc.code, exc.message))
            continue
        if job.status in _CHANGES[action]:
            report.matched += 1
            if len(report.first_ids) < DRY_RUN_IDS:
                report.first_ids.append(job_id)
    return report


def _apply(report: BulkReport, job_id: str, change: Callable[[], bool]) -> None:
    try:
        changed = change()
    except DuetimeError as exc:
        report.failed.append(BulkFailure(job_id, exc.code, exc.message))
        return
    (report.changed if changed else report.unchanged).append(job_id)


def _count(
    ports: Ports, owner: str, action: BulkAction, selection: JobFilter, report: BulkReport, cursor: str | None
) -> BulkReport:
    """A dry run by filter: count the jobs the action would change, from `cursor`, over at most DRY_RUN_PAGES
    pages; `next_cursor` is set when the count stopped there (it is then the count so far)."""
    for _ in range(DRY_RUN_PAGES):
        jobs, cursor = job_cases.list_jobs(ports, owner, MAX_BULK, cursor, selection)
        for job in jobs:
            if job.status in _CHANGES[action]:
                report.matched += 1
                if len(report.first_ids) < DRY_RUN_IDS:
                    report.first_ids.append(job.job_id)
        if cursor is None:
            break
    report.next_cursor = cursor
    return report
