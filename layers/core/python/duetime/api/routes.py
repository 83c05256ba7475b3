"""The API's routes (docs/api.md), each declared once in ROUTES beside the use case it runs: the resolver serves
them (duetime.api.app) and the OpenAPI document describes them (duetime.api.openapi) from that one table.

To add a route: write its use case as `def verb_noun(call: Call) -> Reply` (the name in camelCase becomes
its operationId), calling one service function, and add a `Route` to ROUTES with its method, path, `ok`
answers, access, body model and the error statuses its use case may answer.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from duetime.api import bulk_cases as bulk_routes
from duetime.api import limit_cases as limit_routes
from duetime.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from duetime.api.idempotency import MAX_KEY_CHARS, idempotency_key
from duetime.api.models import (
    MAX_PAGE,
    BackfillRequest,
    BackfillResponse,
    BatchCreateRequest,
    BatchCreateResponse,
    BatchItemResult,
    BudgetShare,
    CalendarList,
    CalendarRequest,
    CalendarResponse,
    CompleteRequest,
    ErrorDetail,
    ExecutionPage,
    HeartbeatRequest,
    HeartbeatResponse,
    JobChange,
    JobPage,
    JobResponse,
    LimitList,
    LimitRequest,
    LimitResponse,
    PreviewForecast,
    PreviewRequest,
    PreviewResponse,
    PreviewSlot,
    RedriveRefusal,
    RedriveRequest,
    RedriveResponse,
    RunNowRequest,
    RunSummary,
)
from duetime.api.pages import size_bounded
from duetime.api.parsing import validation_error
from duetime.api.routing import Access, Answer, Api, Call, Param, Reply, Route, status_of
from duetime.definitions import (
    API_MAX_BATCH_REQUEST_BYTES,
    DEFAULT_JOB_CLASS,
    MAX_BACKFILL_SLOTS,
    MAX_BATCH_JOBS,
    MAX_BULK,
)
from duetime.domain.bounds import first_run_number
from duetime.domain.costs import PRICES_AS_OF
from duetime.domain.errors import Conflict, InvalidInput, InvalidSchedule, NotFound
from duetime.domain.exclusions import CALENDAR_NAME as CALENDAR_NAME_PATTERN
from duetime.domain.exclusions import CALENDAR_NAME_RULE, Exclusions
from duetime.domain.forecast import forecast
from duetime.domain.horizon import HORIZON_RULE, within_horizon
from duetime.domain.keys import JOB_ID_PATTERN, parse_execution_id
from duetime.domain.models import Execution, JobSpec, JobStatus, Overlap, Schedule
from duetime.service import backfill as backfill_cases
from duetime.service import batch as batch_cases
from duetime.service import calendars as calendar_cases
from duetime.service import checkpoints as checkpoint_cases
from duetime.service import edit as edit_cases
from duetime.service import executions as execution_cases
from duetime.service import jobs as job_cases
from duetime.service import redrive as redrive_cases

DEFAULT_PAGE = 50
# Anything but a job id (domain.keys) cannot name a job, so it is 404 before it reaches the store
# (DynamoDB refuses keys over 2 KB).
JOB_ID = re.compile(JOB_ID_PATTERN)

JOB_EXAMPLE: dict[str, Any] = {
    "name": "nightly-invoices",
    "handler": "demo.echo",
    "payload": {"region": "IN"},
    "schedule": {"cron": "0 2 * * *", "timeZone": "Asia/Kolkata"},
    "retry": {"maxAttempts": 5, "baseDelaySeconds": 30, "maxDelaySeconds": 900},
    "timeoutSeconds": 600,
    "overlap": "forbid",
    "catchUp": "latest",
    "startingDeadlineSeconds": None,
    "jobClass": DEFAULT_JOB_CLASS,
}


def checked_job_id(job_id: str) -> str:
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"job {job_id[:80]!r} not found", field="jobId")
    return job_id


def checked_execution_id(execution_id: str) -> str:
    job_id, _ = parse_execution_id(execution_id)
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"execution {execution_id[:120]!r} not found", field="executionId")
    return execution_id


JOB_ID_PARAM = Param(
    "jobId",
    "path",
    "a job id",
    {"type": "string", "minLength": 1, "pattern": f"^{JOB_ID.pattern}$"},
    check=checked_job_id,
)
CALENDAR_NAME_PARAM = Param(
    "name",
    "path",
    f"a calendar name: {CALENDAR_NAME_RULE}",
    {"type": "string", "minLength": 1, "pattern": f"^{CALENDAR_NAME_PATTERN.pattern}$"},
)
EXECUTION_ID_PARAM = Param(
    "executionId", "path", "an execution id", {"type": "string", "minLength": 1}, check=checked_execution_id
)
IDEMPOTENCY_PARAM = Param(
    IDEMPOTENCY_HEADER,
    "header",
    "the same key and body return the first job; another body with it is 422 (24 hours)",
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS, "pattern": "^[ -~]+$"},
)
# GET /jobs narrows the owner's jobs with these (all must hold), applied server-side in the owner's partition.
JOB_FILTER_PARAMS = (
    Param("status", "query", "only jobs in this status", {"type": "string", "enum": [s.value for s in JobStatus]}),
    Param("handler", "query", "only jobs of this handler", {"type": "string", "minLength": 1, "maxLength": 256}),
    Param(
        "tag",
        "query",
        "key:value; only jobs with this tag (repeatable: every one must match)",
        {"type": "string", "pattern": "^[A-Za-z0-9_./-]{1,64}:"},
        repeatable=True,
    ),
)
PAGE_PARAMS = (
    Param(
        "limit",
        "query",
        f"page size, 1..{MAX_PAGE} (default {DEFAULT_PAGE})",
        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    ),
    Param(
        "cursor",
        "query",
        "the `nextCursor` of the previous page; opaque, and valid only for the same listing",
        {"type": "string"},
    ),
)


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


def openapi(call: Call) -> Reply:
    return Reply(200, API.document())


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


def create_jobs(call: Call) -> Reply:
    who = call.who  # with the groups its grants may name
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
        if outcome.created:
            view = job_cases.describe(job, job.next_run_at, now, calendars.of(job), first_run_number(job.schedule))
        else:
            view = job_cases.get_job(call.ports, who.owner, job.job_id)
        job_json = job_response(view).model_dump(mode="json", by_alias=True)  # with its nulls, as POST /jobs
        results.append({"status": 201 if outcome.created else 200, "job": job_json})
    # An item's answer holds `job` or `error` (and `retryAfter` for a 429), never the other as null.
    return Reply(200, {"results": results})


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


def list_calendars(call: Call) -> Reply:
    calendars = calendar_cases.list_calendars(call.ports, call.owner)
    return Reply(200, CalendarList(calendars=[CalendarResponse.of(c) for c in calendars]))


def get_calendar(call: Call) -> Reply:
    return Reply(200, CalendarResponse.of(calendar_cases.get_calendar(call.ports, call.owner, call.path["name"])))


def put_calendar(call: Call) -> Reply:
    dates = call.body_as(CalendarRequest).dates
    calendar, created = calendar_cases.put_calendar(call.ports, call.owner, call.path["name"], dates)
    return Reply(201 if created else 200, CalendarResponse.of(calendar))


def delete_calendar(call: Call) -> Reply:
    calendar_cases.delete_calendar(call.ports, call.owner, call.path["name"])
    return Reply(204)


def preview_schedule(call: Call) -> Reply:
    request = call.body_as(PreviewRequest)
    calendars = calendar_cases.referenced_calendars(call.ports, call.owner, request.exclude)
    try:
        schedule = Schedule(
            at=request.at,
            cron=request.cron,
            every=request.every,
            start_at=request.start_at,
            time_zone=request.time_zone,
            end_at=request.end_at,
            max_runs=request.max_runs,
            dst=request.dst,
        )
    except ValidationError as exc:
        raise validation_error(exc) from exc
    try:
        job_cases.check_bounds(schedule)
    except InvalidInput as exc:  # named for a job's `schedule.*`; here the fields are top level
        raise InvalidInput(exc.message, field=(exc.field or "").removeprefix("schedule.") or None) from exc
    if request.jitter_seconds and request.job_id is None:
        raise InvalidInput("jitterSeconds spreads a job's runs by its id: give jobId too", field="jobId")
    start: datetime = request.from_ or call.ports.clock()
    if not within_horizon(start):
        raise InvalidInput(f"from is out of range: {HORIZON_RULE}", field="from")
    try:
        runs = job_cases.preview(schedule, start, request.count, request.exclude, calendars)
    except InvalidSchedule as exc:  # named for a job's `schedule.*`; here the fields are top level
        raise InvalidSchedule(exc.message, field=(exc.field or "").removeprefix("schedule.") or None) from exc
    slots = None
    if request.job_id is not None:
        due = job_cases.preview_due(request.job_id, request.jitter_seconds, runs)
        slots = [PreviewSlot(scheduled_at=slot, due_at=at) for slot, at in zip(runs, due, strict=True)]
    outlook = None
    if request.forecast:
        exclusions = Exclusions(request.exclude, schedule.time_zone, calendars)
        ahead = forecast(schedule, start, exclusions, request.jitter_seconds)
        outlook = PreviewForecast(**asdict(ahead), prices_as_of=PRICES_AS_OF)
    # `slots` and `forecast` are absent unless asked for, not null
    answer = PreviewResponse(runs=runs, slots=slots, forecast=outlook)
    return Reply(200, answer.model_dump(mode="json", by_alias=True, exclude_none=True))


def heartbeat(call: Call) -> Reply:
    request = call.body_as(HeartbeatRequest)
    execution_id, who = call.path["executionId"], (request.attempt, request.worker_id, request.claim_token)
    if request.has_checkpoint:
        updated = checkpoint_cases.report_checkpoint(call.ports, execution_id, *who, request.checkpoint)
    else:
        updated = execution_cases.report_heartbeat(call.ports, execution_id, *who)
    if updated.lease_until is None:  # a running row always has a lease; never report a bare 200
        raise Conflict("the execution holds no lease", field="attempt")
    return Reply(200, HeartbeatResponse(lease_until=updated.lease_until))


def complete(call: Call) -> Reply:
    request = call.body_as(CompleteRequest)
    ended = execution_cases.report_outcome(
        call.ports,
        call.path["executionId"],
        request.attempt,
        request.worker_id,
        request.claim_token,
        succeeded=request.result == "succeeded",
        result=request.output,
        error=request.error,
        retryable=request.retryable,
    )
    return Reply(200, ended)


def get_execution(call: Call) -> Reply:
    return Reply(200, checkpoint_cases.get_owned_execution(call.ports, call.owner, call.path["executionId"]))


def retry_execution(call: Call) -> Reply:
    return Reply(200, redrive_cases.retry_execution(call.ports, call.owner, call.path["executionId"]))


def list_dead_letters(call: Call) -> Reply:
    ports, owner = call.ports, call.owner

    def fetch(limit: int, cursor: str | None) -> tuple[list[Execution], str | None]:
        page = redrive_cases.list_dead_letters(ports, owner, limit, cursor)
        return page.items, page.cursor

    items, next_cursor = size_bounded(fetch, call.page.limit, call.page.cursor)
    return Reply(200, ExecutionPage(executions=items, next_cursor=next_cursor))


def redrive_dead_letters(call: Call) -> Reply:
    request = call.body_as(RedriveRequest)
    selection = None
    if request.execution_ids is None:
        selection = redrive_cases.DeadLetterFilter(request.job_id, request.failed_after, request.failed_before)
    report = redrive_cases.redrive(
        call.ports, call.owner, request.execution_ids, selection, request.limit, request.cursor
    )
    refused = [RedriveRefusal(execution_id=r.execution_id, code=r.code, message=r.message) for r in report.refused]
    return Reply(200, RedriveResponse(retried=report.retried, refused=refused, next_cursor=report.next_cursor))


JOB = Answer("the job", JobResponse)
CALENDAR = Answer("the calendar", CalendarResponse)
EXECUTION = Answer("the execution", Execution)
WORKER_EXAMPLE = {"attempt": 1, "workerId": "host-4242-a1b2", "claimToken": "Jx2vQ0mN8fVb4kLp7sT1aw"}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/jobs",
        create_job,
        "Submit a job: stored with its first execution, atomically.",
        {201: JOB, 200: Answer("the job first created with this key", JobResponse)},
        params=[IDEMPOTENCY_PARAM],
        body=JobSpec,
        example=JOB_EXAMPLE,
        errors=(403, 422, 429),
    ),
    Route(
        "POST",
        "/jobs/batch",
        create_jobs,
        f"Submit up to {MAX_BATCH_JOBS} jobs: each checked, written (with its first execution, atomically) and "
        "answered on its own, in order, as POST /jobs would answer it alone (201, 200 for an idempotencyKey "
        "seen before, 4xx with the error naming the item's field, 429 with retryAfter past a quota).",
        {200: Answer("one result a job, in the request's order", BatchCreateResponse)},
        body=BatchCreateRequest,
        example={"jobs": [{**JOB_EXAMPLE, "idempotencyKey": "invoice-run-2026-12"}]},
        max_body_bytes=API_MAX_BATCH_REQUEST_BYTES,
    ),
    Route(
        "GET",
        "/jobs",
        list_jobs,
        "The caller's jobs, newest first, optionally filtered (a page may hold fewer than `limit` jobs while "
        "`nextCursor` is set); each with its nextRunAt, lastRun and pastDue, as GET /jobs/{jobId} shows them.",
        {200: Answer("a page of jobs", JobPage)},
        params=JOB_FILTER_PARAMS,
        paged=True,
    ),
    Route(
        "GET",
        "/jobs/{jobId}",
        get_job,
        "One job, with its schedule's health (lastRun, lastSuccess, lastFailure, nextRuns, pastDue).",
        {200: JOB},
        params=[JOB_ID_PARAM],
    ),
    Route(
        "PATCH",
        "/jobs/{jobId}",
        change_job,
        "Pause or resume a job (status, with an optional note shown on the job), or edit its spec: any of its "
        "fields, each replaced whole, under the version read (409 naming version on a lost update). A change "
        "of schedule, jitterSeconds or jobClass replaces the waiting run by the new first slot at once.",
        {200: JOB},
        params=[JOB_ID_PARAM],
        body=JobChange,
        example={"version": 3, "schedule": {"cron": "30 2 * * *", "timeZone": "Asia/Kolkata"}},
        errors=(403, 409),
    ),
    Route(
        "DELETE",
        "/jobs/{jobId}",
        cancel_job,
        "Cancel a job and its waiting executions.",
        {204: Answer("cancelled")},
        params=[JOB_ID_PARAM],
        errors=(409,),
    ),
    Route(
        "POST",
        "/jobs/bulk",
        bulk_routes.bulk_change_jobs,
        f"Pause, resume or cancel many jobs: by jobIds (at most {MAX_BULK}), or those a filter (status, handler,"
        f" tag, as GET /jobs) matches among the next `limit` (at most {MAX_BULK}) listed from `cursor`, the answer's"
        " nextCursor going on. Each job is changed as its own route changes it, and one that cannot be is reported"
        " with its error; dryRun changes nothing and answers the count and the first ids.",
        {200: Answer("what was changed, unchanged or failed (a dry run: would be)", bulk_routes.BulkResponse)},
        body=bulk_routes.BulkRequest,
        example={"action": "pause", "filter": {"tag": ["team:payments"]}, "dryRun": True, "note": "incident 4711"},
    ),
    Route(
        "GET",
        "/jobs/{jobId}/executions",
        list_executions,
        "A job's executions, newest scheduled first (a page may hold fewer than `limit` while `nextCursor` is set:"
        " it stops before its executions' results and payloads pass 4 MB).",
        {200: Answer("a page of executions", ExecutionPage)},
        params=[JOB_ID_PARAM],
        paged=True,
    ),
    Route(
        "POST",
        "/jobs/{jobId}/run",
        run_job_now,
        "An execution due now, outside the schedule; an optional body's payload replaces the job's for it.",
        {201: EXECUTION},
        params=[JOB_ID_PARAM],
        body=RunNowRequest,
        body_required=False,
        example={"payload": {"region": "EU"}},
        errors=(403, 409, 429),
    ),
    Route(
        "GET",
        "/calendars",
        list_calendars,
        "The caller's named calendars.",
        {200: Answer("the calendars, by name", CalendarList)},
    ),
    Route("GET", "/calendars/{name}", get_calendar, "One calendar.", {200: CALENDAR}, params=[CALENDAR_NAME_PARAM]),
    Route(
        "PUT",
        "/calendars/{name}",
        put_calendar,
        "Create or replace a calendar; jobs excluding it see the new dates from their next planned slot.",
        {201: CALENDAR, 200: Answer("the replaced calendar", CalendarResponse)},
        params=[CALENDAR_NAME_PARAM],
        body=CalendarRequest,
        example={"dates": ["2026-12-24/2026-12-26", "2027-01-01"]},
        errors=(409,),
    ),
    Route(
        "DELETE",
        "/calendars/{name}",
        delete_calendar,
        "Delete a calendar no job (not cancelled) excludes; 409 names the jobs that still do.",
        {204: Answer("deleted")},
        params=[CALENDAR_NAME_PARAM],
        errors=(409,),
    ),
    Route(
        "POST",
        "/schedules/preview",
        preview_schedule,
        "The next run times of a schedule, by duetime's cron rules.",
        {200: Answer("run times in UTC", PreviewResponse)},
        access=Access.CALLER,
        body=PreviewRequest,
        example={"cron": "30 2 * * *", "timeZone": "Europe/London", "count": 3},
    ),
    Route(
        "POST",
        "/executions/{executionId}/heartbeat",
        heartbeat,
        "Extend the lease of the attempt a worker holds (workers only).",
        {200: Answer("the new lease", HeartbeatResponse)},
        access=Access.WORKER,
        params=[EXECUTION_ID_PARAM],
        body=HeartbeatRequest,
        example=WORKER_EXAMPLE,
        errors=(409,),
    ),
    Route(
        "POST",
        "/executions/{executionId}/complete",
        complete,
        "Record the outcome of the attempt a worker holds (workers only).",
        {200: EXECUTION},
        access=Access.WORKER,
        params=[EXECUTION_ID_PARAM],
        body=CompleteRequest,
        example={**WORKER_EXAMPLE, "result": "succeeded"},
        errors=(409,),
    ),
    Route(
        "POST",
        "/executions/{executionId}/retry",
        retry_execution,
        "Put a failed execution back, due now, with a fresh retry budget: same id, attempt numbers going on.",
        {200: EXECUTION},
        params=[EXECUTION_ID_PARAM],
        errors=(409,),
    ),
    Route(
        "GET",
        "/dead-letters",
        list_dead_letters,
        "The caller's executions that failed for good (its owner told), newest first (a page may hold fewer than"
        " `limit` while `nextCursor` is set: it stops before its executions' results and payloads pass 4 MB).",
        {200: Answer("a page of failed executions", ExecutionPage)},
        paged=True,
    ),
    Route(
        "POST",
        "/dead-letters/redrive",
        redrive_dead_letters,
        "Retry failed executions by id, or the caller's dead letters matching a filter, a bounded number per "
        "request; reports each retried and each refused.",
        {200: Answer("what was retried and what was not", RedriveResponse)},
        body=RedriveRequest,
        example={"jobId": "j_3f2a9c0d41b7e655", "failedAfter": "2026-11-30T00:00:00Z", "limit": 50},
    ),
    Route(
        "GET",
        "/openapi.json",
        openapi,
        "This document.",
        {200: Answer("the OpenAPI document", schema={"type": "object"})},
        access=Access.PUBLIC,
    ),
    Route(
        "POST",
        "/jobs/{jobId}/backfill",
        backfill_job,
        f"Run every slot of the job's schedule in [from, to) once (kind backfill, at most {MAX_BACKFILL_SLOTS}"
        " slots a request); slots that have an execution already are left as they are.",
        {200: Answer("what was created and what was there already", BackfillResponse)},
        params=[JOB_ID_PARAM],
        body=BackfillRequest,
        example={"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "overlap": "forbid"},
        errors=(403, 409, 429),
    ),
    Route(
        "GET",
        "/limits",
        limit_routes.list_limits,
        "The caller's named rate limits and concurrency caps.",
        {200: Answer("the limits, by name", LimitList)},
    ),
    Route(
        "GET",
        "/limits/{name}",
        limit_routes.get_limit,
        "One limit.",
        {200: Answer("the limit", LimitResponse)},
        params=[limit_routes.LIMIT_NAME_PARAM],
    ),
    Route(
        "PUT",
        "/limits/{name}",
        limit_routes.put_limit,
        "Create or replace a limit: jobs naming it (rateLimit) start at most perSecond runs a second (burst more"
        " after a quiet spell) and, with maxConcurrent, at most that many at once. A run held back waits (its"
        " waitedForLimitMs), it is never failed.",
        {201: Answer("the limit", LimitResponse), 200: Answer("the replaced limit", LimitResponse)},
        params=[limit_routes.LIMIT_NAME_PARAM],
        body=LimitRequest,
        example={"perSecond": 50, "burst": 10, "maxConcurrent": 20},
        errors=(409,),
    ),
    Route(
        "DELETE",
        "/limits/{name}",
        limit_routes.delete_limit,
        "Delete a limit no job (not ended) names; 409 names the jobs that still do.",
        {204: Answer("deleted")},
        params=[limit_routes.LIMIT_NAME_PARAM],
        errors=(409,),
    ),
    Route(
        "GET",
        "/executions/{executionId}",
        get_execution,
        "One of your executions: its status, attempts and last checkpoint (what its next attempt resumes from).",
        {200: EXECUTION},
        params=[EXECUTION_ID_PARAM],
    ),
)

API = Api(
    ROUTES,
    page_params=PAGE_PARAMS,
    description='A distributed job scheduler. Errors are {"error": {"code", "message", "field"}}.',
    security_schemes={
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "a job owner: the API Gateway JWT authorizer on AWS, `duetime token` locally",
        },
        "workerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "a worker: IAM (SigV4) on AWS, `duetime token --worker` locally",
        },
    },
)
