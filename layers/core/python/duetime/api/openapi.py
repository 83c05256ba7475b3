"""The OpenAPI 3.0 document of the API, generated from the same pydantic models that validate requests.

Pure and cheap: no AWS clients, no I/O. `duetime local` serves it at GET /openapi.json; the CDK stack
imports `openapi_document()` (and `gateway_request_schemas()` for API Gateway request models, which
speak JSON Schema draft 4) so the gateway refuses what the handler would refuse.

OpenAPI 3.0 rather than 3.1 because API Gateway imports 3.0; pydantic's JSON Schema 2020-12 is turned
into 3.0's dialect (`nullable`, no `const`) here.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from duetime.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from duetime.api.idempotency import MAX_KEY_CHARS
from duetime.api.models import (
    MAX_PAGE,
    CalendarList,
    CalendarRequest,
    CalendarResponse,
    CompleteRequest,
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
from duetime.domain.exclusions import CALENDAR_NAME as CALENDAR_NAME_PATTERN
from duetime.domain.exclusions import CALENDAR_NAME_RULE
from duetime.domain.models import Execution, JobSpec

TITLE = "duetime"
VERSION = "1.0.0"
REF = "#/components/schemas/{model}"
JOB_ID_PATTERN = "^j_[0-9a-f]{1,64}$"

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
    "jobClass": "default",
}

# Every model that crosses the wire. Validation-mode schemas describe responses too: the models'
# serializer (ISO UTC times) writes exactly what their validators read.
WIRE_MODELS: tuple[type[BaseModel], ...] = (
    JobSpec,
    JobResponse,
    JobPage,
    Execution,
    ExecutionPage,
    StatusChange,
    PreviewRequest,
    PreviewResponse,
    CalendarRequest,
    CalendarResponse,
    CalendarList,
    HeartbeatRequest,
    HeartbeatResponse,
    CompleteRequest,
    ErrorResponse,
)


def _to_openapi30(node: Any) -> Any:
    """JSON Schema 2020-12 (pydantic) -> OpenAPI 3.0 schema objects: `X | None` becomes `nullable`."""
    if isinstance(node, list):
        return [_to_openapi30(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_openapi30(v) for k, v in node.items()}
    if "const" in out:
        out["enum"] = [out.pop("const")]
    variants = out.get("anyOf")
    if isinstance(variants, list) and {"type": "null"} in variants:
        rest = [v for v in variants if v != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            out = {**rest[0], **out}
        elif len(rest) == 1:
            out["allOf"] = rest
        elif rest:
            out["anyOf"] = rest
        out["nullable"] = True
    return out


@lru_cache(maxsize=1)
def _component_schemas() -> dict[str, Any]:
    _, top = models_json_schema([(m, "validation") for m in WIRE_MODELS], by_alias=True, ref_template=REF)
    schemas: dict[str, Any] = _to_openapi30(top.get("$defs", {}))
    return schemas


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(schema: dict[str, Any], description: str, example: Any = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": schema}
    if example is not None:
        media["example"] = example
    return {"description": description, "content": {"application/json": media}}


ERROR_MEANINGS = {
    400: "invalid input; `error.field` names the offending field",
    401: "no bearer token, or one that does not verify",
    403: "the handler is not granted to this owner; `error.field` is `handler`",
    404: "no such job, execution or calendar for this caller (another owner's is not found either)",
    409: "the change does not apply to the current state, or the attempt is stale; a calendar still in use",
    422: "the Idempotency-Key was used with a different body",
    429: "an owner quota is exceeded; `error.field` names it (activeJobs, jobCreatesPerMinute, runNowsPerMinute)",
}
# A 429 says when to try again.
RETRY_AFTER_HEADER = {
    "Retry-After": {"description": "seconds until the request may succeed", "schema": {"type": "integer", "minimum": 1}}
}


def _responses(ok: dict[int, dict[str, Any]], errors: tuple[int, ...]) -> dict[str, Any]:
    responses: dict[str, Any] = {str(code): value for code, value in ok.items()}
    for code in errors:
        responses[str(code)] = _json(_ref(ErrorResponse), ERROR_MEANINGS[code])
        if code == 429:
            responses[str(code)]["headers"] = RETRY_AFTER_HEADER
    return responses


def _path_param(name: str, description: str, pattern: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if pattern:
        schema["pattern"] = pattern
    return {"name": name, "in": "path", "required": True, "description": description, "schema": schema}


PAGE_PARAMS: list[dict[str, Any]] = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": f"page size, 1..{MAX_PAGE} (default 50)",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "the `nextCursor` of the previous page; opaque, and valid only for the same listing",
        "schema": {"type": "string"},
    },
]
JOB_ID = _path_param("jobId", "a job id", JOB_ID_PATTERN)
CALENDAR_NAME = _path_param("name", f"a calendar name: {CALENDAR_NAME_RULE}", f"^{CALENDAR_NAME_PATTERN.pattern}$")
EXECUTION_ID = _path_param("executionId", "an execution id")
WORKER_SECURITY: list[dict[str, list[str]]] = [{"workerAuth": []}]


def _operation(
    operation_id: str,
    summary: str,
    responses: dict[str, Any],
    parameters: list[dict[str, Any]] | None = None,
    body: type[BaseModel] | None = None,
    example: Any = None,
    security: list[dict[str, list[str]]] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": operation_id, "summary": summary, "responses": responses}
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, **_json(_ref(body), body.__name__, example)}
        del operation["requestBody"]["description"]
    if security is not None:
        operation["security"] = security
    return operation


def _paths() -> dict[str, Any]:
    job = _json(_ref(JobResponse), "the job")
    calendar = _json(_ref(CalendarResponse), "the calendar")
    execution = _json(_ref(Execution), "the execution")
    idempotency = {
        "name": IDEMPOTENCY_HEADER,
        "in": "header",
        "required": False,
        "description": "the same key and body return the first job; another body with it is 422 (24 hours)",
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS, "pattern": "^[ -~]+$"},
    }
    return {
        "/jobs": {
            "post": _operation(
                "createJob",
                "Submit a job: stored with its first execution, atomically.",
                _responses(
                    {201: job, 200: _json(_ref(JobResponse), "the job first created with this key")},
                    (400, 401, 403, 404, 422, 429),
                ),
                [idempotency],
                JobSpec,
                JOB_EXAMPLE,
            ),
            "get": _operation(
                "listJobs",
                "The caller's jobs, newest first.",
                _responses({200: _json(_ref(JobPage), "a page of jobs")}, (400, 401, 404)),
                PAGE_PARAMS,
            ),
        },
        "/jobs/{jobId}": {
            "get": _operation("getJob", "One job.", _responses({200: job}, (401, 404)), [JOB_ID]),
            "patch": _operation(
                "changeJob",
                "Pause or resume a job.",
                _responses({200: job}, (400, 401, 404, 409)),
                [JOB_ID],
                StatusChange,
                {"status": "paused"},
            ),
            "delete": _operation(
                "cancelJob",
                "Cancel a job and its waiting executions.",
                _responses({204: {"description": "cancelled"}}, (401, 404, 409)),
                [JOB_ID],
            ),
        },
        "/jobs/{jobId}/executions": {
            "get": _operation(
                "listExecutions",
                "A job's executions, newest scheduled first.",
                _responses({200: _json(_ref(ExecutionPage), "a page of executions")}, (400, 401, 404)),
                [JOB_ID, *PAGE_PARAMS],
            ),
        },
        "/jobs/{jobId}/run": {
            "post": _operation(
                "runJobNow",
                "An execution due now, outside the schedule.",
                _responses({201: execution}, (401, 404, 409, 429)),
                [JOB_ID],
            ),
        },
        "/calendars": {
            "get": _operation(
                "listCalendars",
                "The caller's named calendars.",
                _responses({200: _json(_ref(CalendarList), "the calendars, by name")}, (401, 404)),
            ),
        },
        "/calendars/{name}": {
            "get": _operation("getCalendar", "One calendar.", _responses({200: calendar}, (401, 404)), [CALENDAR_NAME]),
            "put": _operation(
                "putCalendar",
                "Create or replace a calendar; jobs excluding it see the new dates from their next planned slot.",
                _responses(
                    {201: calendar, 200: _json(_ref(CalendarResponse), "the replaced calendar")}, (400, 401, 404, 409)
                ),
                [CALENDAR_NAME],
                CalendarRequest,
                {"dates": ["2026-12-24/2026-12-26", "2027-01-01"]},
            ),
            "delete": _operation(
                "deleteCalendar",
                "Delete a calendar no job (not cancelled) excludes; 409 names the jobs that still do.",
                _responses({204: {"description": "deleted"}}, (401, 404, 409)),
                [CALENDAR_NAME],
            ),
        },
        "/schedules/preview": {
            "post": _operation(
                "previewSchedule",
                "The next run times of a schedule, by duetime's cron rules.",
                _responses({200: _json(_ref(PreviewResponse), "run times in UTC")}, (400, 401)),
                body=PreviewRequest,
                example={"cron": "30 2 * * *", "timeZone": "Europe/London", "count": 3},
            ),
        },
        "/executions/{executionId}/heartbeat": {
            "post": _operation(
                "heartbeat",
                "Extend the lease of the attempt a worker holds (workers only).",
                _responses({200: _json(_ref(HeartbeatResponse), "the new lease")}, (400, 401, 404, 409)),
                [EXECUTION_ID],
                HeartbeatRequest,
                {"attempt": 1, "workerId": "host-4242-a1b2"},
                WORKER_SECURITY,
            ),
        },
        "/executions/{executionId}/complete": {
            "post": _operation(
                "complete",
                "Record the outcome of the attempt a worker holds (workers only).",
                _responses({200: execution}, (400, 401, 404, 409)),
                [EXECUTION_ID],
                CompleteRequest,
                {"attempt": 1, "workerId": "host-4242-a1b2", "result": "succeeded"},
                WORKER_SECURITY,
            ),
        },
        "/openapi.json": {
            "get": _operation(
                "openapi",
                "This document.",
                {"200": _json({"type": "object"}, "the OpenAPI document")},
                security=[],
            ),
        },
    }


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.0 document of API.md's HTTP API; a fresh dict on every call (callers may edit it)."""
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "description": 'A distributed job scheduler. Errors are {"error": {"code", "message", "field"}}.',
        },
        "paths": _paths(),
        "components": {
            "schemas": copy.deepcopy(_component_schemas()),
            "securitySchemes": {
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
        },
        "security": [{"bearerAuth": []}],
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document


def _inline(node: Any, schemas: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(n, schemas) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline(schemas[node["$ref"].rsplit("/", 1)[-1]], schemas)
    return {k: _inline(v, schemas) for k, v in node.items()}


def _to_draft4(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema draft 4 as API Gateway models take it (`nullable` -> a type list)."""
    if isinstance(node, list):
        return [_to_draft4(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_draft4(v) for k, v in node.items() if k not in ("nullable", "title", "description")}
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "allOf" in out:
            out = {"anyOf": [{"allOf": out.pop("allOf")}, {"type": "null"}], **out}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def gateway_request_schemas() -> dict[str, dict[str, Any]]:
    """Each request body's schema as an API Gateway model (JSON Schema draft 4, no $ref), keyed by
    "METHOD /path" as in the document, for request validation at the gateway."""
    document = openapi_document()
    schemas = document["components"]["schemas"]
    models: dict[str, dict[str, Any]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body:
                schema = _to_draft4(_inline(body["content"]["application/json"]["schema"], schemas))
                models[f"{method.upper()} {path}"] = {"$schema": "http://json-schema.org/draft-04/schema#", **schema}
    return models
