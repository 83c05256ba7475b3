"""Least-privilege grants: exactly the DynamoDB and SQS actions each part of duetime calls, on its resources.

What each part calls (store/dynamo.py, queue/sqs.py, service/*): no part scans a table or deletes a job;
only the paths that complete an execution delete a row (the retry move); only workers receive due messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from duetime.definitions import TABLES

# DynamoDB actions by table, per part. TransactWriteItems is authorized by the Put/Update/Delete it contains.
API_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem"],
    "executions": ["GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
    "control": ["GetItem", "PutItem"],
}
PRELOADER_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem"],
    "executions": ["GetItem", "Query", "PutItem", "UpdateItem"],
    "control": ["GetItem", "UpdateItem"],
}
WORKER_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem"],
    "executions": ["GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
}
DLQ_NOTIFIER_TABLE_ACTIONS = {
    "jobs": ["GetItem"],
    "executions": ["GetItem", "UpdateItem"],
}

SEND = ["sqs:SendMessage"]
# What `duetime worker` and the Lambda worker do with their own class's due queue (the event source needs
# GetQueueAttributes as well).
CONSUME = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"]
DRAIN = ["sqs:ReceiveMessage", "sqs:DeleteMessage"]


def grant_tables(role: iam.IRole, tables: dict[str, dynamodb.Table], actions: dict[str, list[str]]) -> None:
    for logical_name, table_actions in actions.items():
        table = tables[logical_name]
        resources = [table.table_arn]
        if "Query" in table_actions:
            definition = next(t for t in TABLES if t.logical_name == logical_name)
            resources += [f"{table.table_arn}/index/{index.name}" for index in definition.indexes]
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in table_actions], resources=resources)
        )


def grant_queues(role: iam.IRole, queues: Iterable[sqs.IQueue], actions: list[str]) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[q.queue_arn for q in queues]))
