"""The use case of POST /jobs/bulk: pause, resume or cancel many jobs, by ids or by GET /jobs's filters
(service.bulk), with its request and answer models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from duetime.api.models import MAX_PAGE
from duetime.api.routing import Call, Reply
from duetime.definitions import MAX_BULK
from duetime.domain.errors import InvalidInput
from duetime.domain.models import MAX_NOTE_CHARS, CamelModel, JobStatus
from duetime.service import bulk as bulk_cases
from duetime.service import jobs as job_cases

# A job id's longest form is far shorter; anything longer names no job (reported per job, never stored).
MAX_JOB_ID_CHARS = 80


class BulkFilter(CamelModel):
    """The jobs a bulk action selects, as GET /jobs's query: every given condition holds; `{}` is all."""

    status: JobStatus | None = None
    handler: str | None = Field(default=None, min_length=1, max_length=256)
    # key:value, each of which must match (as GET /jobs's repeated `tag`)
    tag: list[str] = Field(default_factory=list, max_length=MAX_PAGE)


class BulkRequest(CamelModel):
    """POST /jobs/bulk: an action over jobs named by `jobIds` or matching `filter` (one of the two). A
    filter's request changes the matching jobs among the next `limit` listed from `cursor` (the answer's
    `nextCursor` goes on); `dryRun` changes nothing and answers the count and the first ids."""

    action: Literal["pause", "resume", "cancel"]
    job_ids: list[str] | None = Field(default=None, min_length=1, max_length=MAX_BULK)
    filter: BulkFilter | None = None
    dry_run: bool = False
    limit: int = Field(default=MAX_BULK, ge=1, le=MAX_BULK)
    cursor: str | None = Field(default=None, min_length=1)
    # Stored on each job paused or resumed, as PATCH /jobs/{jobId}'s note.
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    # With jobIds: the version each job was read at (jobId -> version), checked as PATCH's `version` is.
    versions: dict[str, int] | None = None  # its size is bounded by jobIds' (each names one of them)

    @model_validator(mode="after")
    def _one_selection(self) -> BulkRequest:
        if (self.job_ids is None) == (self.filter is None):
            raise ValueError("give either jobIds or filter (a filter of {} selects every job)")
        if self.job_ids is not None and any(not 0 < len(v) <= MAX_JOB_ID_CHARS for v in self.job_ids):
            raise ValueError(f"each job id must be 1 to {MAX_JOB_ID_CHARS} characters")
        if self.versions is not None and self.job_ids is None:
            raise ValueError("versions go with jobIds (a filter's jobs are changed at the version listed)")
        return self


class BulkFailureItem(CamelModel):
    """A job the action did not change, with the error its single-job route answers."""

    job_id: str
    code: str
    message: str


class BulkResponse(CamelModel):
    """What the request changed (a dry run: what it would change). `matched`: the jobs selected, which for a
    filter (and a dry run by ids) are those the action changes (pause: active ones; resume: paused; cancel:
    active or paused); a filter's dry run counts them over up to ten listing pages, with `nextCursor` set if
    it stopped there, and a dry run by ids reports the ids that name none of the caller's jobs in `failed`."""

    action: str
    dry_run: bool
    matched: int
    # A dry run's first ids (at most 20) of the jobs it counted.
    job_ids: list[str]
    changed: list[str]
    # Named by id and already in the state the action gives (a paused job paused again).
    unchanged: list[str]
    failed: list[BulkFailureItem]
    next_cursor: str | None = None


def bulk_change_jobs(call: Call) -> Reply:
    request = call.body_as(BulkRequest)
    selection = None
    if request.filter is not None:
        wanted = request.filter
        try:
            selection = job_cases.job_filter(
                None if wanted.status is None else wanted.status.value, wanted.handler, wanted.tag
            )
        except InvalidInput as exc:  # named for GET /jobs's query; here the fields are the filter's
            raise InvalidInput(exc.message, field=f"filter.{exc.field}") from exc
    who = call.who  # a resume checks each job's handler against the caller's current groups, as PATCH does
    report = bulk_cases.bulk_change(
        call.ports,
        who.owner,
        request.action,
        job_ids=request.job_ids,
        selection=selection,
        dry_run=request.dry_run,
        limit=request.limit,
        cursor=request.cursor,
        note=request.note,
        groups=who.groups,
        versions=request.versions,
    )
    failed = [BulkFailureItem(job_id=f.job_id, code=f.code, message=f.message) for f in report.failed]
    return Reply(
        200,
        BulkResponse(
            action=report.action,
            dry_run=report.dry_run,
            matched=report.matched,
            job_ids=report.first_ids,
            changed=report.changed,
            unchanged=report.unchanged,
            failed=failed,
            next_cursor=report.next_cursor,
        ),
    )
