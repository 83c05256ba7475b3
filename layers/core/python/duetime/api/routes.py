"""The API's routes (docs/api.md), each declared once in ROUTES with the use case it runs: the resolver serves
them (duetime.api.app) and the OpenAPI document describes them (duetime.api.openapi) from that one table. The
use cases live by resource beside it: job_cases (/jobs), bulk_cases (/jobs/bulk), execution_cases (/executions),
dead_letter_cases (/dead-letters), calendar_cases (/calendars), limit_cases (/limits) and preview_cases
(/schedules/preview).

To add a route: write its use case as `def verb_noun(call: Call) -> Reply` (the name in camelCase becomes
its operationId) in its resource's module, calling one service function, and add a `Route` to ROUTES with its
method, path, `ok` answers, access, body model and the error statuses its use case may answer.
"""

from __future__ import annotations

import re
from typing import Any

from duetime.api import (
    bulk_cases,
    calendar_cases,
    dead_letter_cases,
    execution_cases,
    job_cases,
    limit_cases,
    preview_cases,
)
from duetime.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from duetime.api.idempotency import MAX_KEY_CHARS
from duetime.api.models import (
    MAX_PAGE,
    BackfillRequest,
    BackfillResponse,
    BatchCreateRequest,
    BatchCreateResponse,
    CalendarList,
    CalendarRequest,
    CalendarResponse,
    CompleteRequest,
    ExecutionPage,
    HeartbeatRequest,
    HeartbeatResponse,
    JobChange,
    JobPage,
    JobResponse,
    LimitList,
    LimitRequest,
    LimitResponse,
    PreviewRequest,
    PreviewResponse,
    RedriveRequest,
    RedriveResponse,
    RunNowRequest,
)
from duetime.api.routing import Access, Answer, Api, Call, Param, Reply, Route
from duetime.definitions import (
    API_MAX_BATCH_REQUEST_BYTES,
    DEFAULT_JOB_CLASS,
    MAX_BACKFILL_SLOTS,
    MAX_BATCH_JOBS,
    MAX_BULK,
)
from duetime.domain.errors import NotFound
from duetime.domain.exclusions import CALENDAR_NAME as CALENDAR_NAME_PATTERN
from duetime.domain.exclusions import CALENDAR_NAME_RULE
from duetime.domain.keys import JOB_ID_PATTERN, parse_execution_id
from duetime.domain.models import Execution, JobSpec, JobStatus

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
PREFER_PARAM = Param(
    "Prefer",
    "header",
    "return=minimal: each created or replayed item answers its jobId and nextRunAt instead of its whole job "
    "(refused items are answered in full); the answer then carries Preference-Applied: return=minimal",
    {"type": "string", "maxLength": 256},
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


def openapi(call: Call) -> Reply:
    return Reply(200, API.document())


JOB = Answer("the job", JobResponse)
CALENDAR = Answer("the calendar", CalendarResponse)
EXECUTION = Answer("the execution", Execution)
WORKER_EXAMPLE = {"attempt": 1, "workerId": "host-4242-a1b2", "claimToken": "Jx2vQ0mN8fVb4kLp7sT1aw"}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/jobs",
        job_cases.create_job,
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
        job_cases.create_jobs,
        f"Submit up to {MAX_BATCH_JOBS} jobs: each checked, written (with its first execution, atomically) and "
        "answered on its own, in order, as POST /jobs would answer it alone (201, 200 for an idempotencyKey "
        "seen before, 4xx with the error naming the item's field, 429 with retryAfter past a quota).",
        {200: Answer("one result a job, in the request's order", BatchCreateResponse)},
        params=[PREFER_PARAM],
        body=BatchCreateRequest,
        example={"jobs": [{**JOB_EXAMPLE, "idempotencyKey": "invoice-run-2026-12"}]},
        max_body_bytes=API_MAX_BATCH_REQUEST_BYTES,
    ),
    Route(
        "GET",
        "/jobs",
        job_cases.list_jobs,
        "The caller's jobs, newest first, optionally filtered (a page may hold fewer than `limit` jobs while "
        "`nextCursor` is set); each with its nextRunAt, lastRun and pastDue, as GET /jobs/{jobId} shows them.",
        {200: Answer("a page of jobs", JobPage)},
        params=JOB_FILTER_PARAMS,
        paged=True,
    ),
    Route(
        "GET",
        "/jobs/{jobId}",
        job_cases.get_job,
        "One job, with its schedule's health (lastRun, lastSuccess, lastFailure, nextRuns, pastDue).",
        {200: JOB},
        params=[JOB_ID_PARAM],
    ),
    Route(
        "PATCH",
        "/jobs/{jobId}",
        job_cases.change_job,
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
        job_cases.cancel_job,
        "Cancel a job and its waiting executions.",
        {204: Answer("cancelled")},
        params=[JOB_ID_PARAM],
        errors=(409,),
    ),
    Route(
        "POST",
        "/jobs/bulk",
        bulk_cases.bulk_change_jobs,
        f"Pause, resume or cancel many jobs: by jobIds (at most {MAX_BULK}), or those a filter (status, handler,"
        f" tag, as GET /jobs) matches among the next `limit` (at most {MAX_BULK}) listed from `cursor`, the answer's"
        " nextCursor going on. Each job is changed as its own route changes it, and one that cannot be is reported"
        " with its error; dryRun changes nothing and answers the count and the first ids.",
        {200: Answer("what was changed, unchanged or failed (a dry run: would be)", bulk_cases.BulkResponse)},
        body=bulk_cases.BulkRequest,
        example={"action": "pause", "filter": {"tag": ["team:payments"]}, "dryRun": True, "note": "incident 4711"},
    ),
    Route(
        "GET",
        "/jobs/{jobId}/executions",
        job_cases.list_executions,
        "A job's executions, newest scheduled first (a page may hold fewer than `limit` while `nextCursor` is set:"
        " it stops before its executions' results and payloads pass 4 MB, or, on AWS, after reading 500 of the"
        " job's slots, as across a long pause: go on until `nextCursor` is null).",
        {200: Answer("a page of executions", ExecutionPage)},
        params=[JOB_ID_PARAM],
        paged=True,
    ),
    Route(
        "POST",
        "/jobs/{jobId}/run",
        job_cases.run_job_now,
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
        calendar_cases.list_calendars,
        "The caller's named calendars.",
        {200: Answer("the calendars, by name", CalendarList)},
    ),
    Route(
        "GET",
        "/calendars/{name}",
        calendar_cases.get_calendar,
        "One calendar.",
        {200: CALENDAR},
        params=[CALENDAR_NAME_PARAM],
    ),
    Route(
        "PUT",
        "/calendars/{name}",
        calendar_cases.put_calendar,
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
        calendar_cases.delete_calendar,
        "Delete a calendar no job (not cancelled) excludes; 409 names the jobs that still do.",
        {204: Answer("deleted")},
        params=[CALENDAR_NAME_PARAM],
        errors=(409,),
    ),
    Route(
        "POST",
        "/schedules/preview",
        preview_cases.preview_schedule,
        "The next run times of a schedule, by duetime's cron rules.",
        {200: Answer("run times in UTC", PreviewResponse)},
        access=Access.CALLER,
        body=PreviewRequest,
        example={"cron": "30 2 * * *", "timeZone": "Europe/London", "count": 3},
    ),
    Route(
        "POST",
        "/executions/{executionId}/heartbeat",
        execution_cases.heartbeat,
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
        execution_cases.complete,
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
        execution_cases.retry_execution,
        "Put a failed execution back, due now, with a fresh retry budget: same id, attempt numbers going on.",
        {200: EXECUTION},
        params=[EXECUTION_ID_PARAM],
        errors=(409,),
    ),
    Route(
        "GET",
        "/dead-letters",
        dead_letter_cases.list_dead_letters,
        "The caller's executions that failed for good (its owner told), newest first (a page may hold fewer than"
        " `limit` while `nextCursor` is set: it stops before its executions' results and payloads pass 4 MB).",
        {200: Answer("a page of failed executions", ExecutionPage)},
        paged=True,
    ),
    Route(
        "POST",
        "/dead-letters/redrive",
        dead_letter_cases.redrive_dead_letters,
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
        job_cases.backfill_job,
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
        limit_cases.list_limits,
        "The caller's named rate limits and concurrency caps.",
        {200: Answer("the limits, by name", LimitList)},
    ),
    Route(
        "GET",
        "/limits/{name}",
        limit_cases.get_limit,
        "One limit.",
        {200: Answer("the limit", LimitResponse)},
        params=[limit_cases.LIMIT_NAME_PARAM],
    ),
    Route(
        "PUT",
        "/limits/{name}",
        limit_cases.put_limit,
        "Create or replace a limit: jobs naming it (rateLimit) start at most perSecond runs a second (burst more"
        " after a quiet spell) and, with maxConcurrent, at most that many at once. A run held back waits (its"
        " waitedForLimitMs), it is never failed.",
        {201: Answer("the limit", LimitResponse), 200: Answer("the replaced limit", LimitResponse)},
        params=[limit_cases.LIMIT_NAME_PARAM],
        body=LimitRequest,
        example={"perSecond": 50, "burst": 10, "maxConcurrent": 20},
        errors=(409,),
    ),
    Route(
        "DELETE",
        "/limits/{name}",
        limit_cases.delete_limit,
        "Delete a limit no job (not ended) names; 409 names the jobs that still do.",
        {204: Answer("deleted")},
        params=[limit_cases.LIMIT_NAME_PARAM],
        errors=(409,),
    ),
    Route(
        "GET",
        "/executions/{executionId}",
        execution_cases.get_execution,
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
