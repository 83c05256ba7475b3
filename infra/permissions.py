"""Least-privilege grants: exactly the DynamoDB and SQS actions each part of duetime calls, on its resources.

What each part calls (adapters/aws/, service/*): no part scans a table or deletes a job;
only the paths that complete an execution delete a row (the retry move); only workers receive due messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import cast

from aws_cdk import ArnFormat, Fn, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from duetime.adapters.aws.jobs import TASK_READABLE_JOB_ATTRIBUTES
from duetime.definitions import TABLES, webhook_secret_name

from infra.common import suppress

# DynamoDB actions by table, per part. TransactWriteItems is authorized by the Put/Update/Delete it contains.
API_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem"],
    "executions": ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
    # UpdateItem: an owner's named calendars are attributes of one control record (PUT/DELETE /calendars).
    # BatchGetItem, PutItem, UpdateItem: a due hour's shard count, read once and fixed by its first writer.
    "control": ["GetItem", "BatchGetItem", "PutItem", "UpdateItem"],
}
# Completing a job (a bounded job's last run, auto-pause after failures, a one-off job's end) updates its row and
# gives its place back to the owner's active-jobs counter in the control table, in one TransactWriteItems (store
# quotas): UpdateItem on jobs and on control, for every part that ends runs (pre-loader: catch-up and excluded
# dates; workers; the DLQ notifier).
PRELOADER_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem", "UpdateItem"],
    "executions": ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem"],
    # Shard leases and cursors; the shard counts of the hours it fixes ahead (BatchGetItem, PutItem).
    "control": ["GetItem", "BatchGetItem", "PutItem", "UpdateItem"],
}
WORKER_TABLE_ACTIONS = {
    "jobs": ["GetItem", "BatchGetItem", "UpdateItem"],
    "executions": ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
    # The handlers each worker serves, announced and read in one control record per class (service.handlers);
    # the shard count of the hour a retry moves a row to, read once and fixed if nobody has (BatchGetItem, PutItem).
    "control": ["GetItem", "BatchGetItem", "PutItem", "UpdateItem"],
}
DLQ_NOTIFIER_TABLE_ACTIONS = {
    # BatchGetItem: a job read with its timings record (control), to find its runs by their slots' keys.
    "jobs": ["GetItem", "BatchGetItem", "UpdateItem"],
    # Query and BatchGetItem: a redriven catch-up run is failed only if no run of its job is going.
    "executions": ["GetItem", "BatchGetItem", "Query", "UpdateItem"],
    # BatchGetItem: the shard count of a failure notice's hour, a job's timings record; UpdateItem: the
    # active-jobs counter of a job its dead-lettered run ends.
    "control": ["BatchGetItem", "UpdateItem"],
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


def grant_handler_targets(
    role: iam.IRole,
    functions: list[str],
    task_definitions: list[str],
    cluster_arn: str,
    task_roles: list[str] | None = None,
    execution_roles: list[str] | None = None,
) -> None:
    """What `lambda:` and `ecs:` handlers need, on exactly the targets named in context: invoke those
    functions; run those task definitions' families in the workers' cluster only, passing only the roles
    those tasks run as and their execution roles (context handlerTaskRoles, handlerExecutionRoles: RunTask
    passes both), watch and stop the tasks of that cluster."""
    stack = Stack.of(role)
    if functions:
        arns = [
            name
            if name.startswith("arn:")
            else stack.format_arn(
                service="lambda", resource="function", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
            )
            for name in functions
        ]
        role.add_to_principal_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=arns))
    if not task_definitions:
        return
    families = [
        stack.format_arn(service="ecs", resource="task-definition", resource_name=f"{family}:*")
        for family in task_definitions
    ]
    # arn:...:cluster/<name> (an unresolved token in the stack: split at deploy time).
    cluster_name = (
        Fn.select(1, Fn.split("/", cluster_arn)) if Token.is_unresolved(cluster_arn) else cluster_arn.split("/")[-1]
    )
    tasks = stack.format_arn(service="ecs", resource="task", resource_name=f"{cluster_name}/*")
    statements = [
        iam.PolicyStatement(
            actions=["ecs:RunTask"], resources=families, conditions={"ArnEquals": {"ecs:cluster": cluster_arn}}
        ),
        iam.PolicyStatement(actions=["ecs:DescribeTasks", "ecs:StopTask"], resources=[tasks]),
        # DescribeTaskDefinition takes no resource ARN (IAM's service authorization reference): "*" only.
        iam.PolicyStatement(actions=["ecs:DescribeTaskDefinition"], resources=["*"]),
    ]
    role_arns = [
        name
        if name.startswith("arn:")
        else stack.format_arn(service="iam", region="", resource="role", resource_name=name)
        for name in [*(task_roles or []), *(execution_roles or [])]
    ]
    if role_arns:
        statements.append(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=role_arns,
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )
    # A policy of its own, so that its findings are acknowledged here one by one, apart from the role's.
    policy = iam.Policy(cast(Construct, role), "HandlerTargets", statements=statements)
    role.attach_inline_policy(policy)
    family_finding = "arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task-definition/{}:*"
    suppress(
        policy,
        {
            "AwsSolutions-IAM5[Resource::*]": "ecs:DescribeTaskDefinition only: the Service Authorization "
            "Reference lists no resource type for it, so no ARN or condition can narrow it. It reads a family's "
            "container name (RunTask's overrides address it), once per worker process and family; every other "
            "action of this policy names its families, cluster or roles.",
            **{
                f"AwsSolutions-IAM5[Resource::{family_finding.format(family)}]": f"Every revision of the {family!r} "
                "task family named in context handlerTaskDefinitions, run in the workers' cluster only "
                "(condition ecs:cluster)."
                for family in task_definitions
            },
            **_task_findings(stack, cluster_name),
        },
    )


def grant_task_payload_reads(
    scope: Construct, task_roles: list[str], jobs_table: dynamodb.ITable, key: kms.IKey | None
) -> iam.Policy | None:
    """Let the roles `ecs:` handler tasks run as (context handlerTaskRoles) read their run's payload: GetItem
    on the jobs table, of the attributes TASK_READABLE_JOB_ATTRIBUTES names only (duetime.ecs_task).

    duetime hands a task its job id, not its payload (RunTask overrides show in DescribeTasks and CloudTrail).
    dynamodb:LeadingKeys cannot narrow the read to that one job: one role serves every task of its family, and
    the job id is known only at run time, so the role may read any job's payload by id. It cannot list or
    find ids (no Query or Scan, nothing else of the row), and job ids are 64 random bits: a task learns only
    the jobs whose ids it is given. Teams that need payloads kept from each other's task code give each team's
    task families a role of their own and keep secrets out of payloads (webhook secrets, Secrets Manager).
    """
    if not task_roles:
        return None
    stack = Stack.of(scope)
    statements = [
        iam.PolicyStatement(
            actions=["dynamodb:GetItem"],
            resources=[jobs_table.table_arn],
            conditions={
                "ForAllValues:StringEquals": {"dynamodb:Attributes": list(TASK_READABLE_JOB_ATTRIBUTES)},
                # ForAllValues holds for a request that names no attributes at all, and a GetItem without a
                # projection names none (whole rows): the projection must be there. GetItem has no Select
                # parameter, so dynamodb:Select cannot require it; "IfExists" keeps Select from widening a read.
                "Null": {"dynamodb:Attributes": "false"},
                "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
            },
        )
    ]
    if key is not None:  # the table is encrypted with the data key
        statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn]))
    policy = iam.Policy(scope, "HandlerTaskPayloadReads", statements=statements)
    for index, name in enumerate(task_roles):
        arn = (
            name
            if name.startswith("arn:")
            else stack.format_arn(service="iam", region="", resource="role", resource_name=name)
        )
        policy.attach_to_role(iam.Role.from_role_arn(scope, f"HandlerTaskRole{index}", arn))
    return policy


def _task_findings(stack: Stack, cluster_name: str) -> dict[str, str]:
    """The finding of DescribeTasks/StopTask on the cluster's tasks, whose ids are not known before they run."""
    # cdk-nag writes an unresolved name as the JSON of its intrinsic function.
    rendered = json.dumps(stack.resolve(cluster_name), separators=(",", ":"))
    rendered = rendered.strip('"') if not Token.is_unresolved(cluster_name) else rendered
    finding = f"arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/{rendered}/*"
    return {
        f"AwsSolutions-IAM5[Resource::{finding}]": "Tasks of the workers' cluster only: a task's id is known "
        "only once RunTask has started it."
    }


def grant_webhook_secrets(role: iam.IRole, prefix: str) -> None:
    """Read the owners' webhook signing secrets, "<prefix>/webhook-secrets/<owner>", and nothing else in
    Secrets Manager (Secrets Manager appends a random suffix to each ARN: the name prefix ends in "*")."""
    arn = Stack.of(role).format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=webhook_secret_name(prefix, "*"),
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    role.add_to_principal_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[arn]))
    names = webhook_secret_name(prefix, "*")
    finding = f"<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{names}"
    suppress(
        role,
        {
            f"AwsSolutions-IAM5[Resource::arn:{finding}]": "One secret per job owner, made as owners appear: the "
            "workers read the webhook-secrets name prefix (GetSecretValue only), no other secret.",
        },
    )
