"""The use cases of the /jobs routes: submitting one job or a batch, listing, reading, changing and cancelling them,
running one now, backfilling its slots and listing its executions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from duetime.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from duetime.api.idempotency import idempotency_key
from duetime.api.models import (
    BackfillRequest,
    BackfillResponse,
    BatchCreateRequest,
    BatchItemResult,
    BudgetShare,
    ErrorDetail,
    ExecutionPage,
    JobChange,
    JobPage,
    JobResponse,
    RunNowRequest,
    RunSummary,
)
from duetime.api.pages import size_bounded
from duetime.api.parsing import header, validation_error
from duetime.api.routing import Call, Reply, status_of
from duetime.domain.bounds import first_run_number
from duetime.domain.errors import InvalidInput
from duetime.domain.models import JobSpec, Overlap, format_time
from duetime.service import backfill as backfill_cases
from duetime.service import batch as batch_cases
from duetime.service import calendars as calendar_cases
from duetime.service import edit as edit_cases
from duetime.service import jobs as job_cases


def job_response(view: job_cases.JobView) -> JobResponse:
    health = view.health or job_cases.Health()
    return JobResponse(
        **dict(view.job),
        next_runs=view.next_runs,
        last_run=RunSummary.of(health.last_run),
        last_success=RunSummary.of(health.last_success),
        last_failure=RunSummary.of(health.last_failure),
        past_due=RunSummary.of(health.past_due),
        within_budget=[BudgetShare(**share.to_json()) for share in health.within_budget],
    )


def create_job(call: Call) -> Reply:
    who = call.who  # with the groups its grants may name
    key = idempotency_key(call.headers)
    job, created = job_cases.submit_job(call.ports, who.owner, call.body_as(JobSpec), key, groups=who.groups)
    if created:
        calendars = calendar_cases.CalendarCache(call.ports).of(job)
        view = job_cases.describe(job, job.next_run_at, call.ports.clock(), calendars, first_run_number(job.schedule))
    else:
        view = job_cases.get_job(call.ports, who.owner, job.job_id)
    return Reply(201 if created else 200, job_response(view))


# RFC 7240: a client asking for `Prefer: return=minimal` gets each created item's id, not its whole job (a bulk
# creator keeping ids only; building and sending 500 jobs' JSON is a fifth of the route's CPU).
MINIMAL = "return=minimal"


def prefers_minimal(headers: Mapping[str, str] | None) -> bool:
    """Whether the request's Prefer header (preferences comma-separated, each maybe with parameters after
    `;`) asks for return=minimal."""
    preferences = (header(headers, "Prefer") or "").split(",")
    return MINIMAL in {part.split(";", 1)[0].strip().lower() for part in preferences}


def create_jobs(call: Call) -> Reply:
    who = call.who  # with the groups its grants may name
    minimal = prefers_minimal(call.headers)
    items = [_batch_item(raw) for raw in call.body_as(BatchCreateRequest).jobs]
    outcomes = batch_cases.submit_jobs(call.ports, who.owner, items, groups=who.groups)
    now, calendars = call.ports.clock(), calendar_cases.CalendarCache(call.ports)
    results: list[dict[str, Any]] = []
    for outcome in outcomes:
        if outcome.error is not None:
            error = outcome.error
            field = "idempotencyKey" if error.field == IDEMPOTENCY_HEADER else error.field
            detail = ErrorDetail(code=error.code, message=error.message, field=field or None)
            answer = BatchItemResult(status=status_of(error), error=detail, retry_after=error.retry_after)
            results.append(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
            continue
        job = outcome.job
        assert job is not None
        status = 201 if outcome.created else 200
        if minimal:
            next_run = format_time(job.next_run_at) if job.next_run_at is not None else None
            results.append({"status": status, "jobId": job.job_id, "nextRunAt": next_run})
            continue
        if outcome.created:
            view = job_cases.describe(job, job.next_run_at, now, calendars.of(job), first_run_number(job.schedule))
        else:
            view = job_cases.get_job(call.ports, who.owner, job.job_id)
        job_json = job_response(view).model_dump(mode="json", by_alias=True)  # with its nulls, as POST /jobs
        results.append({"status": status, "job": job_json})
    # An item's answer holds `job` (or `jobId` and `nextRunAt`) or `error` (and `retryAfter` for a 429), never
    # the other as null.
    return Reply(200, {"results": results}, headers={"Preference-Applied": MINIMAL} if minimal else None)


def _batch_item(raw: dict[str, Any]) -> batch_cases.BatchItem:
    """One item of POST /jobs/batch as a job spec and its idempotencyKey, or the error it alone answers (a
    field named as POST /jobs names it)."""
    body = dict(raw)
    key = body.pop("idempotencyKey", None)
    try:
        if key is not None:
            key = idempotency_key({IDEMPOTENCY_HEADER: key} if isinstance(key, str) else {IDEMPOTENCY_HEADER: ""})
        spec = JobSpec.model_validate(body, by_alias=True, by_name=False)
    except InvalidInput as exc:
        field = "idempotencyKey" if exc.field == IDEMPOTENCY_HEADER else exc.field
        return batch_cases.BatchItem(InvalidInput(exc.message.replace(IDEMPOTENCY_HEADER, "idempotencyKey"), field))
    except ValidationError as exc:
        return batch_cases.BatchItem(validation_error(exc))
    return batch_cases.BatchItem(spec, key)


def list_jobs(call: Call) -> Reply:
    filters = job_cases.job_filter(call.first("status"), call.first("handler"), call.query.get("tag") or [])
    views, next_cursor = job_cases.list_job_views(call.ports, call.owner, call.page.limit, call.page.cursor, filters)
    return Reply(200, JobPage(jobs=[job_response(view) for view in views], next_cursor=next_cursor))


def get_job(call: Call) -> Reply:
    return Reply(200, job_response(job_cases.get_job(call.ports, call.owner, call.path["jobId"])))


def change_job(call: Call) -> Reply:
    change = call.body_as(JobChange)
    job_id, edits = call.path["jobId"], change.spec_changes
    if edits:
        if change.status is not None or change.note is not None:
            raise InvalidInput("give status (pause or resume) or spec fields to edit, not both", field="status")
        if change.version is None:
            raise InvalidInput("version (as read from the job) is required to edit it", field="version")
        who = call.who  # with the groups its grants may name, as at POST
        edited = edit_cases.edit_job(call.ports, who.owner, job_id, change.version, edits, who.groups)
        return Reply(200, job_response(edited))
    if change.status is None:
        raise InvalidInput("give status, or version with the spec fields to edit", field="status")
    if change.version is not None:  # optional for a pause or resume; checked when given
        edit_cases.check_version(job_cases.get_owned_job(call.ports, call.owner, job_id), change.version)
    if change.status == "paused":  # stopping runs needs no grant
        return Reply(200, job_response(job_cases.pause_job(call.ports, call.owner, job_id, change.note)))
    who = call.who  # resuming starts runs again: with the caller's current groups, as an edit
    return Reply(200, job_response(job_cases.resume_job(call.ports, who.owner, job_id, change.note, who.groups)))


def cancel_job(call: Call) -> Reply:
    job_cases.cancel_job(call.ports, call.owner, call.path["jobId"])
    return Reply(204)


def list_executions(call: Call) -> Reply:
    ports, owner, job_id = call.ports, call.owner, call.path["jobId"]
    items, next_cursor = size_bounded(
        lambda limit, cursor: job_cases.list_executions(ports, owner, job_id, limit, cursor),
        call.page.limit,
        call.page.cursor,
    )
    return Reply(200, ExecutionPage(executions=items, next_cursor=next_cursor))


def run_job_now(call: Call) -> Reply:
    override = call.optional_body(RunNowRequest)
    payload = None if override is None else override.payload
    who = call.who  # its current groups: a grant through a group left since creation no longer runs it
    return Reply(201, job_cases.run_now(call.ports, who.owner, call.path["jobId"], payload, groups=who.groups))


def backfill_job(call: Call) -> Reply:
    request = call.body_as(BackfillRequest)
    who = call.who  # with its current groups, as run now
    done = backfill_cases.backfill(
        call.ports, who.owner, call.path["jobId"], request.start, request.end, Overlap(request.overlap), who.groups
    )
    return Reply(
        200,
        BackfillResponse(
            created=done.created,
            present=done.present,
            skipped=done.skipped,
            first_slot=done.first_slot,
            last_slot=done.last_slot,
            overlap=request.overlap,
        ),
    )
