"""Routes of API.md over the service use-cases; every error becomes a JSON body with its status here."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duetime.api.auth import Caller, caller_from_event
from duetime.domain.errors import (
    Conflict,
    DuetimeError,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    Unauthorized,
)
from duetime.domain.models import (
    CamelModel,
    Execution,
    JobSpec,
    JobStatus,
    Schedule,
    UtcDatetime,
    format_time,
)
from duetime.service import executions as execution_cases
from duetime.service import jobs as job_cases
from duetime.service.context import Ports
from duetime.worker.registry import is_known

STATUS_BY_ERROR: list[tuple[type[DuetimeError], int]] = [
    (InvalidInput, 400),
    (Unauthorized, 401),
    (NotFound, 404),
    (Conflict, 409),
    (IdempotencyMismatch, 422),
]
MAX_BODY_BYTES = 256 * 1024

M = TypeVar("M", bound=BaseModel)


class StatusChange(CamelModel):
    status: JobStatus


class PreviewRequest(CamelModel):
    at: UtcDatetime | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=200)
    time_zone: str = Field(default="UTC", min_length=1, max_length=64)
    from_: UtcDatetime | None = Field(default=None, alias="from")
    count: int = Field(default=10, ge=1, le=100)

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class HeartbeatRequest(CamelModel):
    attempt: int = Field(ge=1)


class CompleteRequest(CamelModel):
    attempt: int = Field(ge=1)
    result: Any = None
    error: str | None = Field(default=None, max_length=4000)
    retryable: bool = True
    # "succeeded" | "failed" in API.md, where `result` names the outcome; a value goes in `output`.
    output: Any = None


def error_response(error: DuetimeError) -> Response[str]:
    status = next((code for cls, code in STATUS_BY_ERROR if isinstance(error, cls)), 400)
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.field:
        body["field"] = error.field
    return Response(status_code=status, content_type="application/json", body=json.dumps({"error": body}))


def validation_error(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "body"
    return InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field)


def job_json(view: job_cases.JobView) -> dict[str, Any]:
    body = view.job.model_dump(mode="json", by_alias=True)
    body["nextRunAt"] = format_time(view.job.next_run_at) if view.job.next_run_at else None
    body["nextRuns"] = [format_time(t) for t in view.next_runs]
    return body


def execution_json(execution: Execution) -> dict[str, Any]:
    return execution.model_dump(mode="json", by_alias=True)


def build_app(ports: Ports, local_secret: str | None = None) -> APIGatewayRestResolver:
    """The API Gateway resolver over `ports`; `local_secret` verifies tokens when no gateway does."""
    app = APIGatewayRestResolver()

    def caller() -> Caller:
        return caller_from_event(app.current_event.raw_event, local_secret)

    def owner() -> str:
        found = caller()
        if found.is_worker:
            raise NotFound("job routes are for job owners", field="jobId")
        return found.owner

    def worker() -> Caller:
        found = caller()
        if not found.is_worker:
            raise NotFound("worker routes need a worker token", field="executionId")
        return found

    def body(model: type[M]) -> M:
        raw = app.current_event.body or ""
        if app.current_event.is_base64_encoded:
            raw = base64.b64decode(raw).decode("utf-8", errors="replace")
        if len(raw.encode()) > MAX_BODY_BYTES:
            raise InvalidInput(f"request body exceeds {MAX_BODY_BYTES} bytes", field="payload")
        try:
            data = json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            raise InvalidInput(f"malformed JSON: {exc}", field="body") from exc
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object", field="body")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise validation_error(exc) from exc

    def limit_and_cursor() -> tuple[int, str | None]:
        params = app.current_event.query_string_parameters or {}
        raw = params.get("limit", "50")
        if not raw.isdigit() or not 1 <= int(raw) <= 100:
            raise InvalidInput("limit must be an integer from 1 to 100", field="limit")
        return int(raw), params.get("cursor") or None

    def json_response(status: int, payload: Any) -> Response[str]:
        return Response(status_code=status, content_type="application/json", body=json.dumps(payload))

    @app.exception_handler(DuetimeError)
    def handle_domain_error(error: DuetimeError) -> Response[str]:
        return error_response(error)

    @app.not_found
    def handle_not_found(_: Exception) -> Response[str]:
        return error_response(NotFound("no such route", field="path"))

    @app.post("/jobs")
    def create_job() -> Response[str]:
        who = owner()
        spec = body(JobSpec)
        if not is_known(spec.handler):
            raise InvalidInput(f"unknown handler {spec.handler!r}", field="handler")
        headers = app.current_event.headers or {}
        key = next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)
        if key is not None and not 1 <= len(key) <= 255:
            raise InvalidInput("Idempotency-Key must be 1..255 characters", field="Idempotency-Key")
        job, created = job_cases.submit_job(ports, who, spec, key)
        view = job_cases.get_job(ports, who, job.job_id)
        return json_response(201 if created else 200, job_json(view))

    @app.get("/jobs")
    def list_jobs() -> Response[str]:
        who = owner()
        limit, cursor = limit_and_cursor()
        jobs, next_cursor = job_cases.list_jobs(ports, who, limit, cursor)
        return json_response(
            200, {"jobs": [j.model_dump(mode="json", by_alias=True) for j in jobs], "nextCursor": next_cursor}
        )

    @app.get("/jobs/<job_id>")
    def get_job(job_id: str) -> Response[str]:
        return json_response(200, job_json(job_cases.get_job(ports, owner(), job_id)))

    @app.patch("/jobs/<job_id>")
    def change_job(job_id: str) -> Response[str]:
        who = owner()
        change = body(StatusChange)
        if change.status == JobStatus.PAUSED:
            view = job_cases.pause_job(ports, who, job_id)
        elif change.status == JobStatus.ACTIVE:
            view = job_cases.resume_job(ports, who, job_id)
        else:
            raise InvalidInput("status must be 'paused' or 'active' (DELETE cancels)", field="status")
        return json_response(200, job_json(view))

    @app.delete("/jobs/<job_id>")
    def delete_job(job_id: str) -> Response[str]:
        job_cases.cancel_job(ports, owner(), job_id)
        return Response(status_code=204, body="")

    @app.get("/jobs/<job_id>/executions")
    def list_executions(job_id: str) -> Response[str]:
        who = owner()
        limit, cursor = limit_and_cursor()
        items, next_cursor = job_cases.list_executions(ports, who, job_id, limit, cursor)
        return json_response(200, {"executions": [execution_json(e) for e in items], "nextCursor": next_cursor})

    @app.post("/jobs/<job_id>/run")
    def run_now(job_id: str) -> Response[str]:
        return json_response(201, execution_json(job_cases.run_now(ports, owner(), job_id)))

    @app.post("/schedules/preview")
    def preview() -> Response[str]:
        caller()
        request = body(PreviewRequest)
        try:
            schedule = Schedule(at=request.at, cron=request.cron, time_zone=request.time_zone)
        except ValidationError as exc:
            raise validation_error(exc) from exc
        start: datetime = request.from_ or ports.clock()
        runs = job_cases.preview(schedule, start, request.count)
        return json_response(200, {"runs": [format_time(t) for t in runs]})

    @app.post("/executions/<execution_id>/heartbeat")
    def heartbeat(execution_id: str) -> Response[str]:
        worker()
        request = body(HeartbeatRequest)
        execution = execution_cases.find_execution(ports, execution_id)
        updated = execution_cases.heartbeat(ports, ports.store.key_of(execution), request.attempt)
        assert updated.lease_until is not None
        return json_response(200, {"leaseUntil": format_time(updated.lease_until)})

    @app.post("/executions/<execution_id>/complete")
    def complete(execution_id: str) -> Response[str]:
        worker()
        request = body(CompleteRequest)
        if request.result not in ("succeeded", "failed"):
            raise InvalidInput("result must be 'succeeded' or 'failed'", field="result")
        execution = execution_cases.find_execution(ports, execution_id)
        ended = execution_cases.complete(
            ports,
            ports.store.key_of(execution),
            request.attempt,
            succeeded=request.result == "succeeded",
            result=request.output,
            error=request.error,
            retryable=request.retryable,
        )
        return json_response(200, execution_json(ended))

    return app
