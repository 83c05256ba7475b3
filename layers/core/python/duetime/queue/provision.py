"""Create each job class's due queues and DLQ with redrive, as the CDK stack does (tests and benchmarks; `duetime
local --backend moto` creates them from the synthesized template: duetime.local.template_stack).

The same attributes as infra/queues.py gives them (tests/infrastructure/test_template_stack.py compares the two):
visibility timeout, retention, SSE-SQS, redrive after MAX_RECEIVE_COUNT receives. Not the stack's TLS-only queue
policies: the local endpoint speaks plain HTTP (duetime.local.template_stack creates them from the template)."""

from __future__ import annotations

import json
from typing import Any

from duetime.definitions import (
    DLQ_RETENTION_SECONDS,
    DUE_QUEUE_RETENTION_SECONDS,
    MAX_RECEIVE_COUNT,
    Settings,
    queue_visibility_seconds,
)


def create_queues(client: Any, settings: Settings) -> None:
    for job_class in settings.job_classes.values():
        dlq_url = client.create_queue(
            QueueName=job_class.dlq_name(settings.prefix),
            Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
        )["QueueUrl"]
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for queue_name in job_class.queue_names(settings.prefix):  # every queue of the class, one DLQ
            client.create_queue(
                QueueName=queue_name,
                Attributes={
                    "VisibilityTimeout": str(queue_visibility_seconds(job_class)),
                    "MessageRetentionPeriod": str(DUE_QUEUE_RETENTION_SECONDS),
                    "SqsManagedSseEnabled": "true",
                    "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}),
                },
            )
