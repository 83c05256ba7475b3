"""`duetime smoke`'s `lambda:` target: a function that sleeps as long as a run asks (functions/smoke_target), so
the smoke test proves that a target longer than the SDK's default read timeout is invoked exactly once.

On by default (it costs nothing idle); context smokeTarget=false leaves it out, and the smoke test records that
check as skipped. Named from the prefix (definitions.smoke_target_name), invokable by the workers (Lambda and
ECS) as a `lambda:` target, granted by the API and workers to the smoke test's owners only
(RuntimeConfig.smoke_target), and named in the stack output SmokeTargetFunction, where the smoke test finds it.
Its role may write its own logs and nothing else."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from duetime.definitions import SMOKE_TARGET_TIMEOUT_SECONDS, smoke_target_name

from infra.common import ROOT, log_group, suppress
from infra.context import DeployContext
from infra.encryption import grant_key_use
from infra.functions import ARCHITECTURE, ASSET_EXCLUDES, RUNTIME, XRAY_WILDCARD

OUTPUT = "SmokeTargetFunction"


class SmokeTarget(Construct):
    """The function, its role and log group, and the output that names it."""

    def __init__(self, scope: Construct, construct_id: str, *, ctx: DeployContext, key: kms.IKey | None) -> None:
        super().__init__(scope, construct_id)
        self.function_name = smoke_target_name(ctx.settings.prefix)
        logs = log_group(self, "Logs", ctx.log_retention_days, key)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),  # type: ignore[arg-type]
            description="duetime smoke target: writes its own logs only",
        )
        logs.grant_write(role)
        grant_key_use(role, key)
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=self.function_name,
            description="duetime smoke target: sleeps as long as a run asks (duetime smoke)",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="index.handler",
            code=lambda_.Code.from_asset(str(ROOT / "functions" / "smoke_target"), exclude=ASSET_EXCLUDES),
            timeout=Duration.seconds(SMOKE_TARGET_TIMEOUT_SECONDS),
            memory_size=128,
            role=role,  # type: ignore[arg-type]
            log_group=logs,  # type: ignore[arg-type]
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.TEXT,  # its own JSON lines as they are printed
            retry_attempts=0,  # invoked synchronously only; an asynchronous invoke is not retried either
            environment_encryption=key,
        )
        CfnOutput(scope, OUTPUT, value=self.function.function_name, description="the `lambda:` target of duetime smoke")
        suppress(role.node.find_child("DefaultPolicy"), {"AwsSolutions-IAM5[Resource::*]": XRAY_WILDCARD})
        suppress(
            self.function,
            {"AwsSolutions-L1": "Python 3.12, as duetime's other functions (their layers are built for cp312)."},
        )
