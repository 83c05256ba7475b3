"""A due message that does not parse (not JSON, or naming no execution) is refused once, where it enters
the worker: it is never claimed or run, it stays queued until the queue redrives it to the DLQ, and the
DLQ drain reports it to nobody's job as `unreadable`."""

from __future__ import annotations

import json

import pytest
from duetime.service.deadletters import drain_dead_letters
from duetime.service.ports import DueMessage

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_crash_recovery import Notices
from tests.integration.test_lambda_worker import LambdaContext, worker_function

# A body as duetime writes them, but for its execution id (the job id and due time are well formed).
NO_EXECUTION = json.dumps(
    {
        "pk": "2026120109#000",
        "sk": "1764579600000#nonsense",
        "executionId": "nonsense",
        "jobId": "j_1",
        "dueMs": 1764579600000,
        "jobClass": "default",
        "kind": "scheduled",
    }
)
MALFORMED = ["{not json", NO_EXECUTION]


@pytest.mark.parametrize("body", MALFORMED)
def test_a_malformed_body_is_refused_as_it_is_read(body):
    with pytest.raises(ValueError):
        DueMessage.from_body(body)


@pytest.mark.parametrize("body", MALFORMED)
def test_the_lambda_worker_leaves_a_malformed_record_queued_for_the_redrive(monkeypatch, body):
    with worker_function(monkeypatch) as module:
        queues = module.PORTS.queues
        url = queues.class_queue_urls["default"][0]
        queues.client.send_message(QueueUrl=url, MessageBody=body)
        [raw] = queues.client.receive_message(QueueUrl=url, VisibilityTimeout=900, MessageSystemAttributeNames=["All"])[
            "Messages"
        ]
        name = module.PORTS.settings.job_class("default").queue_name(module.PORTS.settings.prefix, 0)
        record = {
            "messageId": raw["MessageId"],
            "receiptHandle": raw["ReceiptHandle"],
            "body": raw["Body"],
            "attributes": raw["Attributes"],
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{name}",
            "awsRegion": "us-east-1",
        }
        result = module.handler({"Records": [record]}, LambdaContext())
    assert result == {"batchItemFailures": [{"itemIdentifier": raw["MessageId"]}]}


@pytest.mark.parametrize("body", MALFORMED)
def test_a_receive_meeting_a_malformed_body_fails_and_leaves_it_for_the_redrive(ports, body):
    ports.queues.client.send_message(QueueUrl=ports.queues.queue_urls["default"], MessageBody=body)
    with pytest.raises(ValueError):
        ports.queues.receive("default", 10, 0, 0)


@BOTH_BACKENDS
@pytest.mark.parametrize("body", [NO_EXECUTION])
def test_the_dead_letter_drain_reports_a_malformed_body_as_unreadable(ports, body):
    ports.notifier = notices = Notices()
    ports.queues.dead_letter("default", json.loads(body))
    assert drain_dead_letters(ports, "default") == 1
    assert notices.sent == [{"kind": "unreadable", "body": json.loads(body)}]
