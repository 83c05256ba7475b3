"""X-Ray never records what the API answers (job payloads, results) nor what a worker batch returns (issue 14)."""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from aws_lambda_powertools import Tracer
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.provision import create_queues, create_tables
from duetime.definitions import Settings
from moto import mock_aws


@dataclass
class LambdaContext:
    function_name: str = "duetime-api"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:duetime-api"
    aws_request_id: str = "req-1"


@pytest.fixture
def recorded(monkeypatch) -> list[dict[str, Any]]:
    """Every response the tracer is asked to attach as subsegment metadata, with the capture choice."""
    calls: list[dict[str, Any]] = []
    original = Tracer._add_response_as_metadata

    def spy(
        self: Tracer, method_name: Any = None, data: Any = None, subsegment: Any = None, capture_response: Any = None
    ):
        calls.append({"service": self.service, "capture_response": capture_response, "data": data})
        return original(
            self, method_name=method_name, data=data, subsegment=subsegment, capture_response=capture_response
        )

    monkeypatch.setattr(Tracer, "_add_response_as_metadata", spy)
    # Powertools' own default captures responses; the functions must not rely on the environment to stop it.
    monkeypatch.setenv("POWERTOOLS_TRACER_CAPTURE_RESPONSE", "true")
    monkeypatch.setenv("DUETIME_PREFIX", "tr")
    monkeypatch.setenv("DUETIME_SHARDS", "2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        settings = Settings(prefix="tr", shards=2)
        create_tables(make_client("dynamodb", "us-east-1"), settings)
        create_queues(make_client("sqs", "us-east-1"), settings)
        yield calls


def fresh(module: str) -> Any:
    sys.modules.pop(module, None)
    return importlib.import_module(module)


def api_event(path: str) -> dict[str, Any]:
    return {
        "resource": path,
        "path": path,
        "httpMethod": "GET",
        "headers": {},
        "multiValueHeaders": {},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {"requestId": "r-1", "stage": "v1", "resourcePath": path, "httpMethod": "GET"},
        "body": None,
        "isBase64Encoded": False,
    }


def test_api_function_answers_without_recording_its_response_in_xray(recorded):
    api = fresh("functions.api.index")
    response = api.handler(api_event("/jobs"), LambdaContext())
    assert response["statusCode"] and json.loads(response["body"])  # it answered (an error without a token)
    api_calls = [c for c in recorded if c["service"] == "duetime-api"]
    assert api_calls, "the tracer decorator did not run"
    assert all(c["capture_response"] is False for c in api_calls)


def test_worker_function_does_not_record_its_batch_response_in_xray(recorded):
    worker = fresh("functions.worker.index")
    worker.handler({"Records": []}, LambdaContext(function_name="duetime-worker-default"))
    worker_calls = [c for c in recorded if c["service"] == "duetime-worker"]
    assert worker_calls and all(c["capture_response"] is False for c in worker_calls)
