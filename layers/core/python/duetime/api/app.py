"""Routes of API.md over the service use-cases; every error becomes a JSON body with its status here."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import Any, NoReturn, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from pydantic import BaseModel, ValidationError

from duetime.api.auth import Caller, caller_from_event
from duetime.api.idempotency import idempotency_key
from duetime.api.models import (
    MAX_PAGE,
    CalendarList,
    CalendarRequest,
    CalendarResponse,
    CompleteRequest,
    ErrorDetail,
    ErrorResponse,
    ExecutionPage,
    HeartbeatRequest,
    HeartbeatResponse,
    JobPage,
    JobResponse,
    PreviewRequest,
    PreviewResponse,
    StatusChange,
)
from duetime.api.openapi import openapi_document
from duetime.domain.errors import (
    Conflict,
    DuetimeError,
    Forbidden,
    IdempotencyMismatch,
    InvalidInput,
    InvalidSchedule,
    NotFound,
    QuotaExceeded,
    Unauthorized,
)
from duetime.domain.exclusions import calendars_named
from duetime.domain.keys import parse_execution_id
from duetime.domain.models import Job, JobSpec, Schedule
from duetime.service import calendars as calendar_cases
from duetime.service import executions as execution_cases
from duetime.service import jobs as job_cases
from duetime.service.context import Ports

STATUS_BY_ERROR: list[tuple[type[DuetimeError], int]] = [
    (InvalidInput, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (IdempotencyMismatch, 422),
    (QuotaExceeded, 429),
]
# A job's payload may take 256 KB (JobSpec); the rest of a request body is small.
MAX_BODY_BYTES = 320 * 1024
DEFAULT_PAGE = 50
# Job ids are "j_" and hex (service.jobs.submit_job); anything else cannot name a job, so it is 404
# before it reaches DynamoDB (which refuses keys over 2 KB).
JOB_ID = re.compile(r"j_[0-9a-f]{1,64}")
LIMIT = re.compile(r"[0-9]{1,4}")

M = TypeVar("M", bound=BaseModel)


def error_response(error: DuetimeError) -> Response[str]:
    status = next((code for cls, code in STATUS_BY_ERROR if isinstance(error, cls)), 400)
    body = ErrorResponse(error=ErrorDetail(code=error.code, message=error.message, field=error.field or None))
    # A quota says when to try again (RFC 9110 Retry-After, in seconds).
    headers = {"Retry-After": str(error.retry_after)} if isinstance(error, QuotaExceeded) else None
    return Response(
        status_code=status,
        content_type="application/json",
        body=body.model_dump_json(by_alias=True, exclude_none=True),
        headers=headers,
    )


def validation_error(exc: ValidationError) -> InvalidInput:
    """The first pydantic error as InvalidInput naming the field in wire (camelCase) names."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "body"
    return InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field)


def parse_body(raw: str, model: type[M]) -> M:
    """A request body as `model`; raises InvalidInput naming the field for anything else.

    Refused: bodies over MAX_BODY_BYTES, malformed JSON (NaN and Infinity included), anything but an
    object, strings that are not valid Unicode (lone surrogates, which DynamoDB cannot store), unknown
    fields, and snake_case names (the wire speaks camelCase only).
    """
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise InvalidInput(f"request body exceeds {MAX_BODY_BYTES} bytes", field="body")
    try:
        data = json.loads(raw, parse_constant=_refuse_constant) if raw.strip() else None
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidInput(f"malformed JSON: {str(exc)[:200]}", field="body") from exc
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object", field="body")
    try:
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise validation_error(exc) from exc


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def checked_job_id(job_id: str) -> str:
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"job {job_id[:80]!r} not found", field="jobId")
    return job_id


def checked_execution_id(execution_id: str) -> str:
    job_id, _ = parse_execution_id(execution_id)
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"execution {execution_id[:120]!r} not found", field="executionId")
    return execution_id


def job_response(view: job_cases.JobView) -> JobResponse:
    return JobResponse(**dict(view.job), next_runs=view.next_runs)


def listed_job(job: Job) -> JobResponse:
    return JobResponse(**dict(job))


def build_app(
    ports: Ports, local_secret: str | None = None, local_audience: str | None = None
) -> APIGatewayRestResolver:
    """The API Gateway resolver over `ports`; `local_secret` verifies tokens when no gateway does, and
    `local_audience` (the data dir's instance id) is then the audience they must name."""
    app = APIGatewayRestResolver()

    def caller() -> Caller:
        return caller_from_event(app.current_event.raw_event, local_secret, local_audience)

    def job_owner() -> Caller:
        found = caller()
        if found.is_worker:
            raise NotFound("job routes are for job owners", field="jobId")
        return found

    def owner() -> str:
        return job_owner().owner

    def worker() -> Caller:
        found = caller()
        if not found.is_worker:
            raise NotFound("worker routes need a worker token", field="executionId")
        return found

    def body(model: type[M]) -> M:
        raw = app.current_event.body or ""
        if app.current_event.is_base64_encoded:
            try:
                raw = base64.b64decode(raw).decode("utf-8")
            except ValueError as exc:
                raise InvalidInput("the body must be UTF-8 JSON", field="body") from exc
        return parse_body(raw, model)

    def limit_and_cursor() -> tuple[int, str | None]:
        params = app.current_event.query_string_parameters or {}
        raw = params.get("limit")
        if raw is None:
            return DEFAULT_PAGE, params.get("cursor") or None
        if not LIMIT.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_PAGE}", field="limit")
        return int(raw), params.get("cursor") or None

    def json_response(status: int, payload: BaseModel | dict[str, Any]) -> Response[str]:
        text = payload.model_dump_json(by_alias=True) if isinstance(payload, BaseModel) else json.dumps(payload)
        return Response(status_code=status, content_type="application/json", body=text)

    @app.exception_handler(DuetimeError)  # type: ignore[untyped-decorator]
    def handle_domain_error(error: DuetimeError) -> Response[str]:
        return error_response(error)

    @app.not_found
    def handle_not_found(_: Exception) -> Response[str]:
        return error_response(NotFound("no such route", field="path"))

    @app.get("/openapi.json")
    def openapi() -> Response[str]:
        return json_response(200, openapi_document())

    @app.post("/jobs")
    def create_job() -> Response[str]:
        who = job_owner()  # with the groups its grants may name
        spec = body(JobSpec)
        key = idempotency_key(app.current_event.headers)
        job, created = job_cases.submit_job(ports, who.owner, spec, key, groups=who.groups)
        if created:
            view = job_cases.describe(job, job.next_run_at, ports.clock(), calendar_cases.CalendarCache(ports).of(job))
        else:
            view = job_cases.get_job(ports, who.owner, job.job_id)
        return json_response(201 if created else 200, job_response(view))

    @app.get("/jobs")
    def list_jobs() -> Response[str]:
        who = owner()
        limit, cursor = limit_and_cursor()
        jobs, next_cursor = job_cases.list_jobs(ports, who, limit, cursor)
        return json_response(200, JobPage(jobs=[listed_job(j) for j in jobs], next_cursor=next_cursor))

    @app.get("/jobs/<job_id>")
    def get_job(job_id: str) -> Response[str]:
        who = owner()
        return json_response(200, job_response(job_cases.get_job(ports, who, checked_job_id(job_id))))

    @app.patch("/jobs/<job_id>")
    def change_job(job_id: str) -> Response[str]:
        who = owner()
        checked_job_id(job_id)
        change = body(StatusChange)
        if change.status == "paused":
            view = job_cases.pause_job(ports, who, job_id)
        else:
            view = job_cases.resume_job(ports, who, job_id)
        return json_response(200, job_response(view))

    @app.delete("/jobs/<job_id>")
    def delete_job(job_id: str) -> Response[str]:
        who = owner()
        job_cases.cancel_job(ports, who, checked_job_id(job_id))
        return Response(status_code=204, body="")

    @app.get("/jobs/<job_id>/executions")
    def list_executions(job_id: str) -> Response[str]:
        who = owner()
        checked_job_id(job_id)
        limit, cursor = limit_and_cursor()
        items, next_cursor = job_cases.list_executions(ports, who, job_id, limit, cursor)
        return json_response(200, ExecutionPage(executions=items, next_cursor=next_cursor))

    @app.post("/jobs/<job_id>/run")
    def run_now(job_id: str) -> Response[str]:
        who = owner()
        return json_response(201, job_cases.run_now(ports, who, checked_job_id(job_id)))

    @app.get("/calendars")
    def list_calendars() -> Response[str]:
        calendars = calendar_cases.list_calendars(ports, owner())
        return json_response(200, CalendarList(calendars=[CalendarResponse.of(c) for c in calendars]))

    @app.get("/calendars/<name>")
    def get_calendar(name: str) -> Response[str]:
        return json_response(200, CalendarResponse.of(calendar_cases.get_calendar(ports, owner(), name)))

    @app.put("/calendars/<name>")
    def put_calendar(name: str) -> Response[str]:
        who = owner()
        request = body(CalendarRequest)
        calendar, created = calendar_cases.put_calendar(ports, who, name, request.dates)
        return json_response(201 if created else 200, CalendarResponse.of(calendar))

    @app.delete("/calendars/<name>")
    def delete_calendar(name: str) -> Response[str]:
        calendar_cases.delete_calendar(ports, owner(), name)
        return Response(status_code=204, body="")

    @app.post("/schedules/preview")
    def preview() -> Response[str]:
        who = caller()
        request = body(PreviewRequest)
        calendar_cases.check_references(ports, who.owner, request.exclude)
        calendars = ports.store.get_calendars(who.owner) if calendars_named(request.exclude) else None
        try:
            schedule = Schedule(
                at=request.at,
                cron=request.cron,
                every=request.every,
                start_at=request.start_at,
                time_zone=request.time_zone,
            )
        except ValidationError as exc:
            raise validation_error(exc) from exc
        start: datetime = request.from_ or ports.clock()
        try:
            runs = job_cases.preview(schedule, start, request.count, request.exclude, calendars)
        except InvalidSchedule as exc:  # named for a job's `schedule.*`; here the fields are top level
            raise InvalidSchedule(exc.message, field=(exc.field or "").removeprefix("schedule.") or None) from exc
        return json_response(200, PreviewResponse(runs=runs))

    @app.post("/executions/<execution_id>/heartbeat")
    def heartbeat(execution_id: str) -> Response[str]:
        worker()
        request = body(HeartbeatRequest)
        execution = execution_cases.find_execution(ports, checked_execution_id(execution_id))
        execution_cases.check_holder(execution, request.attempt, request.worker_id)
        key = ports.store.key_of(execution)
        job = ports.store.get_job(execution.job_id)
        run_ends = execution_cases.run_ends(execution, job)
        updated = execution_cases.heartbeat(
            ports, key, request.attempt, execution.job_class, run_ends, request.worker_id
        )
        if updated.lease_until is None:  # a running row always has a lease; never report a bare 200
            raise Conflict("the execution holds no lease", field="attempt")
        return json_response(200, HeartbeatResponse(lease_until=updated.lease_until))

    @app.post("/executions/<execution_id>/complete")
    def complete(execution_id: str) -> Response[str]:
        worker()
        request = body(CompleteRequest)
        execution = execution_cases.find_execution(ports, checked_execution_id(execution_id))
        execution_cases.check_holder(execution, request.attempt, request.worker_id)
        ended = execution_cases.complete(
            ports,
            ports.store.key_of(execution),
            request.attempt,
            succeeded=request.result == "succeeded",
            result=request.output,
            error=request.error,
            retryable=request.retryable,
            current=execution,
        )
        return json_response(200, ended)

    return app
