"""The OpenAPI document: valid OpenAPI 3.0, generated from the models, every route documented, and
API Gateway request models (draft 4) that accept what the handler accepts; importable without AWS."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
from duetime.api.app import build_app
from duetime.api.openapi import JOB_EXAMPLE, gateway_request_schemas, openapi_document
from duetime.domain.models import JobSpec
from openapi_spec_validator import validate
from pydantic.alias_generators import to_camel

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


def test_every_route_of_the_handler_is_documented_with_its_method():
    documented = {(m.upper(), p) for p, item in openapi_document()["paths"].items() for m in item}
    app = build_app(ports=None)  # type: ignore[arg-type]  # its routes only; nothing is called
    served = set()
    for route in app._static_routes + app._dynamic_routes:
        path = route.rule.pattern.removeprefix("^").removesuffix("/*$")
        path = re.sub(r"\(\?P<(\w+)>.*?\]\+\)", lambda m: "{" + to_camel(m.group(1)) + "}", path)
        served.add((route.method, path))
    assert served == documented


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
        "PATCH /jobs/{jobId}",
        "POST /schedules/preview",
        "PUT /calendars/{name}",
        "POST /executions/{executionId}/heartbeat",
        "POST /executions/{executionId}/complete",
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
