"""The customer-managed KMS key of context kmsKey (created here or an existing one) for tables, queues, topic, logs."""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.context import CREATE_KMS_KEY

# What a part of duetime does with the data key through DynamoDB, SQS and Lambda: named actions, no wildcards.
KEY_USE = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]


def data_key(scope: Construct, kms_key: str | None) -> kms.IKey | None:
    """None (AWS managed keys), a new rotating key whose policy lets CloudWatch Logs and alarms use it, or the
    key at an ARN (its key policy is its owner's: it must admit this account, logs and cloudwatch the same way)."""
    if kms_key is None:
        return None
    if kms_key != CREATE_KMS_KEY:
        return kms.Key.from_key_arn(scope, "DataKey", kms_key)
    stack = Stack.of(scope)
    key = kms.Key(
        scope,
        "DataKey",
        description="duetime data: tables, queues, alarm topic, logs, function environments",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.RETAIN,  # the tables and logs it encrypts are retained too
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=[
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncryptFrom",
                "kms:ReEncryptTo",
                "kms:GenerateDataKey",
                "kms:DescribeKey",
            ],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    # CloudWatch alarms publish to the alert topic, encrypted with this key.
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
        )
    )
    return key


def grant_key_use(role: iam.IRole, key: kms.IKey | None) -> None:
    """Read and write through services that encrypt with `key` (DynamoDB, SQS, Lambda environments)."""
    if key is not None:
        role.add_to_principal_policy(iam.PolicyStatement(actions=KEY_USE, resources=[key.key_arn]))
