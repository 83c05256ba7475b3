"""Paths and small helpers the constructs share: log groups with retention, cdk-nag suppressions, hosted UI
domain prefixes."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from infra.context import LOG_RETENTION_CHOICES

ROOT = Path(__file__).resolve().parents[1]


def retention(days: int) -> logs.RetentionDays:
    return logs.RetentionDays[LOG_RETENTION_CHOICES[days]]


def log_group(scope: Construct, construct_id: str, days: int, key: kms.IKey | None = None) -> logs.LogGroup:
    """A log group kept for `days`, encrypted with `key` when given (context kmsKey); retained on stack
    deletion, as audit records should be."""
    return logs.LogGroup(
        scope, construct_id, retention=retention(days), removal_policy=RemovalPolicy.RETAIN, encryption_key=key
    )


def suppress(construct: IConstruct, reasons: dict[str, str]) -> None:
    """Acknowledge cdk-nag findings on `construct` and its children, each with the reason it is acceptable here.

    A key is a rule ("AwsSolutions-SQS3") or one finding of a rule ("AwsSolutions-IAM5[Resource::*]").
    """
    Validations.of(construct).acknowledge(*(Acknowledgment(id=rule, reason=reason) for rule, reason in reasons.items()))


def hosted_ui_domain_prefix(scope: Construct, name: str) -> str:
    """A user pool's hosted UI domain prefix: `name` and the stack's account id.

    A Cognito domain prefix is taken per region across every account: a bare "duetime" would deploy once in a
    region, in whichever account came first. Within an account the settings' prefix is unique already (it names
    the tables and queues)."""
    return f"{name}-{Stack.of(scope).account}"
