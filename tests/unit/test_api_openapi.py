"""The OpenAPI document: valid OpenAPI 3.0, generated from the models, every route documented, and
API Gateway request models (draft 4) that accept what the handler accepts; importable without AWS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from duetime.api.app import build_app, error_response, reply_response
from duetime.api.job_cases import get_job
from duetime.api.models import JobResponse
from duetime.api.openapi import gateway_request_schemas, openapi_document
from duetime.api.routes import JOB_EXAMPLE, ROUTES
from duetime.api.routing import ERROR_MEANINGS, Access, Answer, Reply, Route
from duetime.domain.errors import (
    Forbidden,
    IdempotencyMismatch,
    InvalidSchedule,
    NotFound,
    StaleAttempt,
    Unauthorized,
    Unavailable,
)
from duetime.domain.models import JobSpec
from duetime.local.http_bridge import to_event
from openapi_spec_validator import validate

ROOT = Path(__file__).resolve().parents[2]
API_MD_EXAMPLE = {
    "name": "nightly-invoices",
    "handler": "billing.generate_invoices",
    "payload": {"region": "IN"},
    "schedule": {"cron": "0 2 * * *", "timeZone": "Asia/Kolkata"},
    "retry": {"maxAttempts": 5, "baseDelaySeconds": 30, "maxDelaySeconds": 900},
    "timeoutSeconds": 3600,
    "overlap": "forbid",
    "catchUp": "latest",
    "startingDeadlineSeconds": None,
    "jobClass": "default",
}


def test_the_document_is_valid_openapi_3_0():
    document = openapi_document()
    assert document["openapi"] == "3.0.3"
    validate(document)


SAMPLE_PATH_VALUES = {"jobId": "j_0000000000000001", "name": "holidays-de", "executionId": "j_1.1796115600000"}


def resolve(method: str, path: str) -> tuple[int, dict[str, Any]]:
    app = build_app(ports=None, local_secret="unit-secret-of-thirty-two-bytes!!")  # type: ignore[arg-type]
    response = app.resolve(to_event(method, path, {}, b""), None)
    return response["statusCode"], json.loads(response["body"])


@pytest.mark.parametrize("route", ROUTES, ids=[f"{r.method} {r.path}" for r in ROUTES])
def test_every_documented_route_is_served_and_asks_for_a_token_unless_public(route):
    status, body = resolve(route.method, route.path.format(**SAMPLE_PATH_VALUES))
    if route.access is Access.PUBLIC:
        assert status == 200 and body == openapi_document()
    else:
        assert (status, body["error"]["code"]) == (401, "unauthorized")
        assert route.operation_id in {op["operationId"] for op in openapi_document()["paths"][route.path].values()}


def test_a_method_no_route_declares_is_404_in_the_error_shape():
    documented = openapi_document()["paths"]
    assert "put" not in documented["/jobs"]
    status, body = resolve("PUT", "/jobs")
    assert status == 404 and body["error"]["field"] == "path"


def test_a_route_must_declare_each_path_parameter():
    with pytest.raises(ValueError, match="jobId"):
        Route("GET", "/jobs/{jobId}", get_job, "One job.", {200: Answer("the job", JobResponse)})


def test_a_use_case_answering_a_status_its_route_does_not_declare_is_refused_not_sent():
    route = next(r for r in ROUTES if r.operation_id == "getJob")
    assert route.ok.keys() == {200}
    with pytest.raises(RuntimeError, match="201"):
        reply_response(route, Reply(201, None))


def test_the_machinery_adds_400_401_404_and_503_to_the_errors_a_route_declares():
    by_id = {r.operation_id: r for r in ROUTES}
    # body; owner route; quotas; a busy store
    assert by_id["createJob"].error_statuses() == [400, 401, 403, 404, 422, 429, 503]
    assert by_id["getJob"].error_statuses() == [401, 404, 503]
    assert by_id["previewSchedule"].error_statuses() == [400, 401, 503]  # any caller: no 404 for the token kind
    assert by_id["openapi"].error_statuses() == []


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidSchedule("bad cron", field="schedule.cron"), 400),
        (Unauthorized("no token"), 401),
        (Forbidden("not granted", field="handler"), 403),
        (NotFound("no job", field="jobId"), 404),
        (StaleAttempt("attempt 1 does not hold", field="attempt"), 409),
        (IdempotencyMismatch("another body"), 422),
        (Unavailable("the database was busy"), 503),
    ],
)
def test_each_domain_error_answers_its_status_in_the_error_shape_and_the_document_says_what_it_means(error, status):
    response = error_response(error)
    body = json.loads(response.body)
    assert response.status_code == status
    assert body["error"]["code"] == error.code and body["error"]["message"] == error.message
    assert body["error"].get("field") == (error.field or None)
    documented = {
        int(code): answer["description"]
        for item in openapi_document()["paths"].values()
        for operation in item.values()
        for code, answer in operation["responses"].items()
    }
    assert documented[status] == ERROR_MEANINGS[status]


def test_the_job_schema_is_the_models_wire_shape():
    spec = openapi_document()["components"]["schemas"]["JobSpec"]
    assert set(spec["properties"]) == {f.alias for f in JobSpec.model_fields.values()}
    assert spec["required"] == ["name", "handler", "schedule"]
    assert spec["additionalProperties"] is False
    assert spec["properties"]["timeoutSeconds"]["minimum"] == 1
    assert spec["properties"]["timeoutSeconds"]["maximum"] == 43200
    assert spec["properties"]["startingDeadlineSeconds"]["nullable"] is True


def test_the_documents_example_is_a_valid_job():
    JobSpec.model_validate(JOB_EXAMPLE)
    example = openapi_document()["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["example"]
    assert example == JOB_EXAMPLE


def test_gateway_models_are_draft_4_without_refs_and_accept_the_api_md_example():
    models = gateway_request_schemas()
    assert set(models) == {
        "POST /jobs",
        "POST /jobs/batch",
        "PATCH /jobs/{jobId}",
        "POST /schedules/preview",
        "PUT /calendars/{name}",
        "POST /executions/{executionId}/heartbeat",
        "POST /executions/{executionId}/complete",
        "POST /dead-letters/redrive",
        "POST /jobs/{jobId}/backfill",
        "PUT /limits/{name}",
        "POST /jobs/bulk",
    }
    for schema in models.values():
        jsonschema.Draft4Validator.check_schema(schema)
        text = json.dumps(schema)
        assert "$ref" not in text and '"nullable"' not in text
    jobs = jsonschema.Draft4Validator(models["POST /jobs"])
    assert jobs.is_valid(API_MD_EXAMPLE)
    assert not jobs.is_valid({**API_MD_EXAMPLE, "unknown": 1})
    assert not jobs.is_valid({**API_MD_EXAMPLE, "timeoutSeconds": 0})
    assert not jobs.is_valid({"name": "x", "handler": "demo.echo"})
    calendar = jsonschema.Draft4Validator(models["PUT /calendars/{name}"])
    assert calendar.is_valid({"dates": ["2026-12-25", "2026-12-24/2026-12-26"]})
    assert not calendar.is_valid({"dates": ["2026-12-25"], "name": "x"})
    backfill = jsonschema.Draft4Validator(models["POST /jobs/{jobId}/backfill"])
    assert backfill.is_valid({"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "overlap": "allow"})
    assert not backfill.is_valid({"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z", "overlap": "replace"})
    assert not backfill.is_valid({"to": "2026-11-02T00:00:00Z"})
    # The gateway checks a batch's shape only: a bad item is the API's to answer in its place, not a 400 for all
    batch = jsonschema.Draft4Validator(models["POST /jobs/batch"])
    assert batch.is_valid({"jobs": [API_MD_EXAMPLE, {"name": ""}]})
    assert not batch.is_valid({"jobs": []}) and not batch.is_valid({"jobs": ["x"]})
    assert not batch.is_valid({"jobs": [API_MD_EXAMPLE] * 501})
    limit = jsonschema.Draft4Validator(models["PUT /limits/{name}"])
    assert limit.is_valid({"perSecond": 50, "burst": 10, "maxConcurrent": 20})
    assert not limit.is_valid({"perSecond": 0}) and not limit.is_valid({"burst": 1})
    bulk = jsonschema.Draft4Validator(models["POST /jobs/bulk"])
    assert bulk.is_valid({"action": "pause", "filter": {"tag": ["team:payments"]}, "dryRun": True})
    assert bulk.is_valid({"action": "cancel", "jobIds": ["j_3f2a9c0d41b7e655"]})
    assert not bulk.is_valid({"action": "stop", "filter": {}}) and not bulk.is_valid({"action": "pause", "limit": 101})


def test_every_operation_documents_401_and_every_job_or_execution_route_404_with_the_error_schema():
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    for path, item in openapi_document()["paths"].items():
        for operation in item.values():
            codes = {int(code) for code in operation["responses"]}
            for code in codes - {200, 201, 204}:
                assert operation["responses"][str(code)]["content"]["application/json"]["schema"] == error
            if path != "/openapi.json":
                assert 401 in codes, path
            if path.startswith(("/jobs", "/executions")):
                assert 404 in codes, path


def test_a_busy_store_answers_503_with_retry_after_and_every_route_behind_a_token_documents_it():
    response = error_response(Unavailable("the database was busy", retry_after=2))
    assert response.status_code == 503 and response.headers["Retry-After"] == "2"
    assert json.loads(response.body)["error"]["code"] == "unavailable"
    for path, item in openapi_document()["paths"].items():
        for operation in item.values():
            if operation.get("security") == []:
                continue  # public: reads no store
            busy = operation["responses"]["503"]
            assert busy["headers"]["Retry-After"]["schema"]["type"] == "integer", path


def test_each_call_returns_a_fresh_document():
    first = openapi_document()
    first["components"]["schemas"]["JobSpec"]["properties"].clear()
    assert openapi_document()["components"]["schemas"]["JobSpec"]["properties"]


def test_the_module_imports_without_boto3():
    code = "import sys, duetime.api.openapi as o; o.openapi_document(); print('boto3' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "layers" / "core" / "python"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "False"


def test_the_document_says_cron_takes_a_seconds_field_and_every_whole_seconds():
    schemas = openapi_document()["components"]["schemas"]
    for model in ("Schedule", "PreviewRequest"):
        assert "6 with a seconds field first" in schemas[model]["properties"]["cron"]["description"]
        assert "from 1 s" in schemas[model]["properties"]["every"]["description"]
    # The gateway's models carry no descriptions, and accept a six-field cron and a seconds interval.
    create = gateway_request_schemas()["POST /jobs"]
    body = {"name": "t", "handler": "demo.echo", "schedule": {"cron": "*/5 * * * * *"}}
    jsonschema.validate(body, create)
    jsonschema.validate({**body, "schedule": {"every": "1s"}}, create)
