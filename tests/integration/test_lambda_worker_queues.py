"""The Lambda worker of a class spread over two due queues, invoked as Lambda invokes it with a batch from
queue 1 (its eventSourceARN): every visibility change and delete goes to queue 1, never to queue 0."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from duetime.adapters.aws.queue import DueMessage
from duetime.domain.keys import shard_of
from duetime.domain.models import JobSpec
from duetime.service.jobs import submit_job

from tests.integration.test_lambda_worker import LambdaContext, record_for, worker_function

QUEUE_CALLS = {"ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "DeleteMessage", "DeleteMessageBatch"}


@pytest.fixture
def worker_module(monkeypatch):
    with worker_function(monkeypatch, {"default": 2}) as module:
        yield module


class QueueCalls:
    """The QueueUrl of every visibility change and delete the worker's SQS client makes."""

    def __init__(self, client: Any) -> None:
        self.urls: list[str] = []
        client.meta.events.register("before-parameter-build.sqs.*", self._record)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in QUEUE_CALLS:
            self.urls.append(params["QueueUrl"])


def message_of_queue_1(ports, clock_offset: float) -> DueMessage:
    """A job whose shard maps to queue 1, due `clock_offset` seconds from now; its own message dropped."""
    now = ports.clock()
    while True:
        spec = JobSpec.model_validate(
            {
                "name": "t",
                "handler": "demo.echo",
                "schedule": {"at": (now + timedelta(seconds=clock_offset)).isoformat()},
            }
        )
        created, _ = submit_job(ports, "alice", spec)
        if shard_of(created.job_id, 4) % 2 == 1:
            break
    while ports.queues.receive("default", 10, 0, 0):  # drop what submit sent; the test sends its own
        pass
    [execution] = ports.store.executions_of_job(created.job_id)
    return DueMessage.for_execution(execution, ports.store.key_of(execution))


def visible_on(ports, index: int) -> list[str]:
    url = ports.queues.class_queue_urls["default"][index]
    messages = ports.queues.client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=900)
    return [m["MessageId"] for m in messages.get("Messages", [])]


def test_a_batch_from_queue_1_changes_visibility_on_queue_1(worker_module):
    ports = worker_module.PORTS
    assert len(ports.queues.class_queue_urls["default"]) == 2
    queue_1 = ports.queues.class_queue_urls["default"][1]
    due, early = message_of_queue_1(ports, -1), message_of_queue_1(ports, 120)
    records = [record_for(ports, m, index=1) for m in (due, early)]
    calls = QueueCalls(ports.queues.client)
    result = worker_module.handler({"Records": records}, LambdaContext(aws_request_id="q1-1"))
    # The early one stays queued (hidden until near its due time, on queue 1); the due one ran
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {records[1]["messageId"]}
    assert ports.store.get_execution(due.key).status.value == "succeeded"
    assert calls.urls and set(calls.urls) == {queue_1}, calls.urls


def test_a_record_from_queue_1_that_fails_before_its_claim_comes_back_on_queue_1_promptly(worker_module, monkeypatch):
    ports = worker_module.PORTS
    queue_1 = ports.queues.class_queue_urls["default"][1]
    record = record_for(ports, message_of_queue_1(ports, -1), index=1)

    def unreachable(job_id: str) -> None:
        raise ConnectionError("DynamoDB is unreachable")

    calls = QueueCalls(ports.queues.client)
    with monkeypatch.context() as patch:
        patch.setattr(ports.store, "get_job", unreachable)
        result = worker_module.handler({"Records": [record]}, LambdaContext(aws_request_id="q1-2"))
    assert result == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert calls.urls == [queue_1]  # the short backoff went to queue 1 (on queue 0 the handle is unknown)
    time.sleep(worker_module.retry_backoff_seconds(1) + 0.2)
    assert visible_on(ports, 1) == [record["messageId"]]
    assert visible_on(ports, 0) == []
