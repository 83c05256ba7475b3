"""Every Lambda entry point under functions/ invoked as Lambda invokes it: the environment the CDK stack
sets, the module imported fresh (its cold-start code runs), a new context per invocation, Powertools
Logger/Metrics/Tracer active, against moto; the response and the structured log lines are checked."""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from aws_lambda_powertools.logging import logger as powertools_logger
from aws_lambda_powertools.metrics.provider import cold_start as metrics_cold_start
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.provision import create_queues, create_tables
from duetime.adapters.aws.queue import DueQueues
from duetime.api.auth import issue_token
from duetime.config import runtime_environment
from duetime.definitions import Settings
from duetime.domain.models import format_time
from moto import mock_aws

from tests.conftest import ROOT

SETTINGS = Settings(prefix="ep", shards=4, preload_interval_seconds=60, preload_window_seconds=300)
SECRET = "entry-points-test-secret-of-32-bytes-or-more"
# The deployed entry points, each run here as its platform invokes it.
ENTRY_POINTS = {
    "api": "functions/api/index.py",
    "preloader": "functions/preloader/index.py",
    "worker": "functions/worker/index.py",
    "dlq_notifier": "functions/dlq_notifier/index.py",
}
SERVICES = ("duetime-api", "duetime-preloader", "duetime-worker", "duetime-dlq-notifier")
_module_ids = itertools.count()


@dataclass
class LambdaContext:
    """What the Lambda runtime hands a handler: a fresh request id on every invocation."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Deployment:
    """The moto account the functions run against, with the environment the stack gives them."""

    env: dict[str, str]
    queues: DueQueues
    monkeypatch: pytest.MonkeyPatch

    def load(self, name: str, **extra_env: str) -> ModuleType:
        """Import functions/<name>/index.py as a cold start does: a fresh module, its env set."""
        for key, value in {**self.env, "POWERTOOLS_SERVICE_NAME": name, **extra_env}.items():
            self.monkeypatch.setenv(key, value)
        for service in SERVICES:  # a fresh sandbox: Powertools has configured no logger yet
            stale = logging.getLogger(service)
            for handler in list(stale.handlers):
                stale.removeHandler(handler)
            for attribute in ("init", "powertools_handler", "powertools_buffer_config", "powertools_buffer_cache"):
                if hasattr(stale, attribute):
                    delattr(stale, attribute)
        # A new sandbox is a new process: its first invocation is a cold start again.
        powertools_logger.is_cold_start = True
        metrics_cold_start.is_cold_start = True
        path = ROOT / ENTRY_POINTS[name]
        spec = importlib.util.spec_from_file_location(f"lambda_{name}_{next(_module_ids)}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    with mock_aws():
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        dynamodb, sqs = make_client("dynamodb", "us-east-1"), make_client("sqs", "us-east-1")
        create_tables(dynamodb, SETTINGS)
        create_queues(sqs, SETTINGS)
        queues = DueQueues.resolve(sqs, SETTINGS)
        # The variables the stack sets (infra/functions.py), from the same mapping.
        env = runtime_environment(
            SETTINGS,
            region="us-east-1",
            queue_urls=queues.queue_urls,
            dlq_urls=queues.dlq_urls,
        )
        env.update(POWERTOOLS_TRACE_DISABLED="1", AWS_LAMBDA_FUNCTION_NAME="ep-function")
        yield Deployment(env=env, queues=queues, monkeypatch=monkeypatch)


def log_lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines a function printed (Powertools logs and EMF metrics); anything else is refused."""
    lines = [line for line in text.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def api_event(method: str, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> dict[str, Any]:
    """An API Gateway REST proxy event whose token the function verifies itself (DUETIME_JWT_SECRET)."""
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        "multiValueHeaders": {},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": "127.0.0.1"},
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def submit(api: ModuleType, token: str, at: datetime, **extra: Any) -> dict[str, Any]:
    body = {"name": "ep", "handler": "demo.echo", "schedule": {"at": format_time(at)}, **extra}
    response = api.handler(api_event("POST", "/jobs", body, token), LambdaContext("ep-api"))
    assert response["statusCode"] == 201, response
    return dict(json.loads(response["body"]))


def test_the_api_function_serves_a_request_and_logs_it_with_the_lambda_context(deployment, capsys):
    api = deployment.load("api", DUETIME_JWT_SECRET=SECRET)
    token = issue_token(SECRET, "alice")
    capsys.readouterr()
    job = submit(api, token, datetime.now(UTC) + timedelta(minutes=10))
    context = LambdaContext("ep-api")
    response = api.handler(api_event("GET", f"/jobs/{job['jobId']}", token=token), context)
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["jobId"] == job["jobId"]
    bad = api.handler(api_event("POST", "/jobs", {"name": "x"}, token), LambdaContext("ep-api"))
    assert bad["statusCode"] == 400 and json.loads(bad["body"])["error"]["field"]
    # The API logs nothing of its own on these paths; what it would log carries the invocation's context
    assert log_lines(capsys.readouterr().out) == []
    keys = api.logger.get_current_keys()
    assert keys["service"] == "duetime-api" and keys["function_request_id"] != context.aws_request_id
    api.handler(api_event("GET", "/jobs", token=token), context)
    assert api.logger.get_current_keys()["function_request_id"] == context.aws_request_id


def test_the_preloader_function_preloads_on_every_tick_and_logs_its_cycle(deployment, capsys):
    api = deployment.load("api", DUETIME_JWT_SECRET=SECRET)
    token = issue_token(SECRET, "alice")
    submit(api, token, datetime.now(UTC) + timedelta(seconds=120))
    preloader = deployment.load("preloader")
    capsys.readouterr()
    contexts = [LambdaContext("ep-preloader") for _ in range(2)]
    reports = [preloader.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, c) for c in contexts]
    # The job was sent at submit (inside the window); each cycle leases every shard anyway.
    assert all(r["errors"] == 0 for r in reports)
    lines = log_lines(capsys.readouterr().out)
    cycles = [line for line in lines if line.get("message") == "pre-load cycle"]
    assert [c["function_request_id"] for c in cycles] == [c.aws_request_id for c in contexts]
    assert all(c["cycle"]["shards"] == SETTINGS.shards for c in cycles)
    assert cycles[0]["cold_start"] is True and cycles[1]["cold_start"] is False
    emf = [line for line in lines if "_aws" in line]
    assert len(emf) == 2 and all("Dispatched" in m and m["_aws"]["CloudWatchMetrics"][0]["Namespace"] for m in emf)


def sqs_event(deployment: Deployment, job_class: str, visibility: int = 900) -> dict[str, Any]:
    """Records as the SQS event source builds them from messages it received (with the queue's visibility)."""
    queues = deployment.queues
    raw = queues.client.receive_message(
        QueueUrl=queues.queue_urls[job_class],
        MaxNumberOfMessages=10,
        VisibilityTimeout=visibility,
        MessageSystemAttributeNames=["All"],
    ).get("Messages", [])
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{SETTINGS.prefix}-due-{job_class}",
                "awsRegion": "us-east-1",
            }
            for m in raw
        ]
    }


def test_the_worker_function_runs_a_received_batch_and_logs_under_its_request_id(deployment, capsys):
    api = deployment.load("api", DUETIME_JWT_SECRET=SECRET)
    token = issue_token(SECRET, "alice")
    job = submit(api, token, datetime.now(UTC) - timedelta(seconds=1))
    worker = deployment.load("worker", DUETIME_JOB_CLASS="default")
    event = sqs_event(deployment, "default")
    assert len(event["Records"]) == 1 and event["Records"][0]["attributes"]["ApproximateReceiveCount"] == "1"
    capsys.readouterr()
    context = LambdaContext("ep-worker-default")
    assert worker.handler(event, context) == {"batchItemFailures": []}
    [execution] = worker.PORTS.store.executions_of_job(job["jobId"])
    assert execution.status.value == "succeeded" and execution.worker_id == f"lambda-{context.aws_request_id}"
    lines = log_lines(capsys.readouterr().out)
    logs = [line for line in lines if "level" in line]
    assert [line["message"] for line in logs] == ["started", "finished"]
    assert all(line["service"] == "duetime-worker" for line in logs)
    assert all(line["function_request_id"] == context.aws_request_id for line in logs)
    assert logs[1]["executionId"] == execution.execution_id and logs[1]["outcome"] == "Succeeded"
    metrics = {name for line in lines if "_aws" in line for name in line if name[0].isupper()}
    assert {"Started", "Succeeded"} <= metrics


def test_the_dlq_notifier_function_drains_and_logs_what_it_handled(deployment, capsys):
    deployment.queues.dead_letter("default", {"kind": "failed", "executionId": "j_x.0000000000000", "owner": "o"})
    topic = make_client("sns", "us-east-1").create_topic(Name="ep-alerts")["TopicArn"]
    notifier = deployment.load("dlq_notifier", DUETIME_ALERT_TOPIC_ARN=topic)
    capsys.readouterr()
    context = LambdaContext("ep-dlq-notifier")
    assert notifier.handler({"source": "aws.events"}, context) == {"default": 1, "long": 0}
    lines = log_lines(capsys.readouterr().out)
    [summary] = [line for line in lines if line.get("message") == "dead letters handled"]
    assert summary["handled"] == {"default": 1, "long": 0}
    assert summary["function_request_id"] == context.aws_request_id
