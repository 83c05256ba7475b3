"""Create each job class's due queues and DLQ with redrive, as the CDK stack does (the local runtime and tests)."""

from __future__ import annotations

import json
from typing import Any

from duetime.definitions import MAX_RECEIVE_COUNT, Settings, queue_visibility_seconds


def create_queues(client: Any, settings: Settings) -> None:
    for job_class in settings.job_classes.values():
        dlq_url = client.create_queue(QueueName=job_class.dlq_name(settings.prefix))["QueueUrl"]
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for queue_name in job_class.queue_names(settings.prefix):  # every queue of the class, one DLQ
            client.create_queue(
                QueueName=queue_name,
                Attributes={
                    "VisibilityTimeout": str(queue_visibility_seconds(job_class)),
                    "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}),
                },
            )
