"""Create the tables of duetime.definitions and each job class's due queues (tests and benchmarks; CDK does it on
AWS, and `duetime local --backend moto` creates them from the synthesized template: duetime.local.template_stack).

As infra/storage.py and infra/queues.py declare them (tests/infrastructure/test_template_stack.py compares them).
Tables: keys, indexes and projections, on demand, encrypted, deletion-protected, with point-in-time recovery and
each table's TTL attribute enabled (one call each after the table, as CloudFormation does). Queues: visibility
timeout, retention, SSE-SQS, redrive after MAX_RECEIVE_COUNT receives to the class's DLQ; not the stack's TLS-only
queue policies: the local endpoint speaks plain HTTP (duetime.local.template_stack creates them from the template)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from duetime.definitions import (
    DLQ_RETENTION_SECONDS,
    DUE_QUEUE_RETENTION_SECONDS,
    MAX_RECEIVE_COUNT,
    TABLES,
    Settings,
    queue_visibility_seconds,
)


def create_tables(client: Any, settings: Settings) -> None:
    for table in TABLES:
        name = settings.table_name(table)
        keys = [{"AttributeName": table.partition_key, "KeyType": "HASH"}]
        if table.sort_key:
            keys.append({"AttributeName": table.sort_key, "KeyType": "RANGE"})
        kwargs: dict[str, Any] = {
            "TableName": name,
            "KeySchema": keys,
            "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in table.attribute_names()],
            "BillingMode": "PAY_PER_REQUEST",
            "SSESpecification": {"Enabled": True},
            "DeletionProtectionEnabled": True,
        }
        if table.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
                    + ([{"AttributeName": index.sort_key, "KeyType": "RANGE"}] if index.sort_key else []),
                    "Projection": {"ProjectionType": index.projection},
                }
                for index in table.indexes
            ]
        try:
            client.create_table(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
            continue  # created before, with its TTL and recovery
        if table.ttl_attribute:
            client.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"AttributeName": table.ttl_attribute, "Enabled": True}
            )
        client.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
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
