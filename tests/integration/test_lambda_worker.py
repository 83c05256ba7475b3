"""The Lambda worker (functions/worker) against moto: a batch runs concurrently and only the records
whose message must stay queued (early) are reported as failures; one that failed before its claim
comes back promptly, not after the queue's visibility timeout."""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest
from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.provision import create_queues, create_tables
from duetime.adapters.aws.queue import DueMessage
from duetime.definitions import Settings
from duetime.domain.models import JobSpec
from duetime.service.backfill import backfill
from duetime.service.executions import claim_execution
from duetime.service.jobs import submit_job
from moto import mock_aws


@dataclass
class LambdaContext:
    function_name: str = "duetime-worker-default"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:duetime-worker-default"
    aws_request_id: str = "req-1"


@contextmanager
def worker_function(monkeypatch, class_queues: dict[str, int] | None = None) -> Iterator[ModuleType]:
    """functions/worker imported fresh (a cold start) over moto's tables and queues, prefix `lw`, 4 shards."""
    with mock_aws():
        monkeypatch.setenv("DUETIME_PREFIX", "lw")
        monkeypatch.setenv("DUETIME_SHARDS", "4")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        settings = Settings(prefix="lw", shards=4)
        if class_queues:
            monkeypatch.setenv("DUETIME_CLASS_QUEUES", json.dumps(class_queues))
            settings = settings.with_class_queues(class_queues)
        create_tables(make_client("dynamodb", "us-east-1"), settings)
        create_queues(make_client("sqs", "us-east-1"), settings)
        sys.modules.pop("functions.worker.index", None)
        yield importlib.import_module("functions.worker.index")


@pytest.fixture
def worker_module(monkeypatch):
    with worker_function(monkeypatch) as module:
        yield module


def record_for(ports, message: DueMessage, index: int = 0) -> dict:
    """Put `message` on due queue `index` of `default` and take it off as that queue's event source would."""
    queues = ports.queues
    url = queues.class_queue_urls["default"][index]
    queues.client.send_message(QueueUrl=url, MessageBody=message.to_body())
    [raw] = queues.client.receive_message(QueueUrl=url, VisibilityTimeout=900, MessageSystemAttributeNames=["All"])[
        "Messages"
    ]
    name = ports.settings.job_class("default").queue_name(ports.settings.prefix, index)
    return {
        "messageId": raw["MessageId"],
        "receiptHandle": raw["ReceiptHandle"],
        "body": raw["Body"],
        "attributes": raw["Attributes"],
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{name}",
        "awsRegion": "us-east-1",
    }


def test_partial_batch_failures_report_only_messages_that_must_stay_queued(worker_module):
    ports = worker_module.PORTS
    now = ports.clock()

    def job(at_offset: float) -> DueMessage:
        spec = JobSpec.model_validate(
            {"name": "t", "handler": "demo.echo", "schedule": {"at": (now + timedelta(seconds=at_offset)).isoformat()}}
        )
        created, _ = submit_job(ports, "alice", spec)
        [execution] = ports.store.executions_of_job(created.job_id)
        return DueMessage.for_execution(execution, ports.store.key_of(execution))

    due, early, held = job(-1), job(120), job(-1)
    assert claim_execution(ports, held, "another-worker").verdict.value == "claimed"
    while ports.queues.receive("default", 10, 0, 0):  # drop what submit sent; the test sends its own
        pass
    records = [record_for(ports, m) for m in (due, early, held)]
    result = worker_module.handler({"Records": records}, LambdaContext())
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    # The early message stays queued; the one whose row another live lease holds is a duplicate: deleted
    assert failed == {records[1]["messageId"]}
    assert ports.store.get_execution(due.key).status.value == "succeeded"
    assert ports.store.get_execution(early.key).status.value == "scheduled"
    held_row = ports.store.get_execution(held.key)
    assert held_row.status.value == "running" and held_row.worker_id == "another-worker"


def test_a_record_that_fails_before_its_claim_comes_back_promptly(worker_module, monkeypatch):
    ports = worker_module.PORTS
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"at": (ports.clock() - timedelta(seconds=1)).isoformat()}}
    )
    created, _ = submit_job(ports, "alice", spec)
    [execution] = ports.store.executions_of_job(created.job_id)
    while ports.queues.receive("default", 10, 0, 0):  # drop what submit sent; the test sends its own
        pass
    record = record_for(ports, DueMessage.for_execution(execution, ports.store.key_of(execution)))

    def unreachable(job_id: str) -> None:
        raise ConnectionError("DynamoDB is unreachable")

    # When the store fails before the claim (the event source received it with a 900 s visibility)
    with monkeypatch.context() as patch:
        patch.setattr(ports.store, "get_job", unreachable)
        result = worker_module.handler({"Records": [record]}, LambdaContext(aws_request_id="req-2"))
    assert result == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    # Then the message is back within a second or two, not in 15 minutes, and runs
    time.sleep(worker_module.retry_backoff_seconds(1) + 0.2)
    again = ports.queues.client.receive_message(
        QueueUrl=ports.queues.queue_urls["default"], VisibilityTimeout=900, MessageSystemAttributeNames=["All"]
    ).get("Messages", [])
    assert [m["MessageId"] for m in again] == [record["messageId"]]
    assert ports.store.get_execution(ports.store.key_of(execution)).status.value == "scheduled"


def test_a_record_that_fails_after_its_claim_keeps_the_visibility_of_its_lease(worker_module, monkeypatch):
    ports = worker_module.PORTS
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"at": (ports.clock() - timedelta(seconds=1)).isoformat()}}
    )
    created, _ = submit_job(ports, "alice", spec)
    [execution] = ports.store.executions_of_job(created.job_id)
    while ports.queues.receive("default", 10, 0, 0):
        pass
    record = record_for(ports, DueMessage.for_execution(execution, ports.store.key_of(execution)))

    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionError("DynamoDB is unreachable")

    with monkeypatch.context() as patch:
        patch.setattr(ports.store, "finish", broken)  # the run succeeds, recording it fails
        result = worker_module.handler({"Records": [record]}, LambdaContext(aws_request_id="req-3"))
    assert result == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    row = ports.store.get_execution(ports.store.key_of(execution))
    assert row.status.value == "running" and row.worker_id == "lambda-req-3"
    # Its visibility ends with the lease this invocation took (30 s), not after the short backoff
    time.sleep(worker_module.retry_backoff_seconds(1) + 0.2)
    assert ports.queues.receive("default", 10, 0, 0) == []


def test_a_serial_backfill_record_waiting_its_turn_is_deleted_and_sent_again_as_a_fresh_delayed_message(
    worker_module,
):
    # Given a serial backfill of two slots whose first runs on another worker
    ports = worker_module.PORTS
    spec = JobSpec.model_validate({"name": "y", "handler": "demo.echo", "schedule": {"cron": "0 0 1 1 *"}})
    created, _ = submit_job(ports, "alice", spec)
    backfill(ports, "alice", created.job_id, datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
    first, second = sorted(
        (e for e in ports.store.executions_of_job(created.job_id) if e.kind == "backfill"),
        key=lambda e: e.scheduled_at,
    )
    while ports.queues.receive("default", 10, 0, 0):  # drop what backfill sent; the test sends its own
        pass
    first_message = DueMessage.for_execution(first, ports.store.key_of(first))
    assert claim_execution(ports, first_message, "another-worker").verdict.value == "claimed"
    # When the second's record reaches the function while the first runs
    record = record_for(ports, DueMessage.for_execution(second, ports.store.key_of(second)))
    result = worker_module.handler({"Records": [record]}, LambdaContext(aws_request_id="req-3"))
    # Then the record is not a failure (the event source deletes it: its receive count goes with it) and a fresh
    # copy waits on the queue, delayed until the run should look again
    assert result == {"batchItemFailures": []}
    attributes = ports.queues.client.get_queue_attributes(
        QueueUrl=ports.queues.queue_urls["default"], AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert ports.store.get_execution(ports.store.key_of(second)).status.value == "scheduled"
