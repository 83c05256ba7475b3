"""Functions and layers: the core and its dependencies as layers, one arm64 Python function per handler,
each with its own role that holds only what its handler calls."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from constructs import Construct
from duetime.config import function_environment, quota_environment, runtime_environment
from duetime.definitions import (
    API_FUNCTION_TIMEOUT_SECONDS,
    DLQ_NOTIFIER_TIMEOUT_SECONDS,
    FUNCTION_MEMORY_MB,
    RUNS_PER_SCHEDULE,
    WORKER_BATCH_SIZE,
    WORKER_BATCHING_WINDOW_SECONDS,
)

from infra.build_layers import DEPS_LAYER_DIR, stage_core_layer
from infra.common import ROOT, log_group, suppress
from infra.context import DeployContext
from infra.encryption import grant_key_use
from infra.handlers import api_handler_environment, grants_environment, stage_layer
from infra.permissions import (
    API_TABLE_ACTIONS,
    CONSUME,
    DLQ_NOTIFIER_TABLE_ACTIONS,
    DRAIN,
    PRELOADER_TABLE_ACTIONS,
    SEND,
    WORKER_TABLE_ACTIONS,
    grant_queues,
    grant_tables,
    grant_webhook_secrets,
)
from infra.queues import Queues, lambda_worker_timeout
from infra.storage import Storage

RUNTIME = lambda_.Runtime.PYTHON_3_12  # the dependency layer is built for CPython 3.12 (build_layers.py)
ARCHITECTURE = lambda_.Architecture.ARM_64
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "*.egg-info", "**/*.egg-info"]
# The layers ship their bytecode for the runtime's Python (build_layers.compile_for_runtime).
LAYER_EXCLUDES = ["*.egg-info", "**/*.egg-info"]
# X-Ray's PutTraceSegments and PutTelemetryRecords take no resource ARN: "*" is the only choice.
XRAY_WILDCARD = (
    "Only xray:PutTraceSegments and xray:PutTelemetryRecords (granted by tracing=ACTIVE) are on Resource *: "
    "X-Ray supports no resource-level permissions. Every other statement of this policy names its resources."
)
# The scheduled functions (pre-loader, DLQ notifier) reserve RUNS_PER_SCHEDULE per rule: each rule's run of the
# minute and one that overlaps it at most. The pre-loader has a rule per shard group (context preloadShardGroups),
# all firing at once: a reservation of 2 throttled some groups every minute once there were more than 2.
# Lambda retries a failed or timed-out asynchronous invocation twice on its own by default: a scheduled run is
# not retried, the next tick does its work (the pre-loader also loads what is overdue; the DLQ notifier drains
# what is left), and a retry would only overlap it.
SCHEDULED_ASYNC_RETRIES = 0


def preloader_reserved_concurrency(shard_groups: int) -> int:
    return RUNS_PER_SCHEDULE * shard_groups


def stack_environment(ctx: DeployContext, queues: Queues) -> dict[str, str]:
    """The DUETIME_* variables RuntimeConfig.from_env reads, shared by every function and the ECS worker."""
    stack = Stack.of(queues)
    return runtime_environment(
        ctx.settings,
        region=stack.region,
        queue_urls=queues.queue_urls(),
        dlq_urls=queues.dlq_urls(),
        lease_seconds=ctx.lease_seconds,
    )


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    timeout: Duration


class Functions(Construct):
    """The api, preloader, worker (the `default` class, or any class whose worker_kind is "lambda") and
    dlq_notifier functions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: DeployContext,
        storage: Storage,
        queues: Queues,
        alert_topic: sns.Topic,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        deps_python = DEPS_LAYER_DIR / "python"
        if not deps_python.is_dir():
            raise FileNotFoundError(f"{deps_python} is missing: run `python infra/build_layers.py` (make synth does)")
        self.deps_layer = lambda_.LayerVersion(
            self,
            "DepsLayer",
            code=lambda_.Code.from_asset(str(DEPS_LAYER_DIR), exclude=LAYER_EXCLUDES),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="duetime third-party dependencies (pip, manylinux2014_aarch64, cp312)",
        )
        self.core_layer = lambda_.LayerVersion(
            self,
            "CoreLayer",
            code=lambda_.Code.from_asset(str(stage_core_layer()), exclude=LAYER_EXCLUDES),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="duetime core (layers/core/python/duetime)",
        )
        # The team's handler folder (context handlerPath), on the worker functions only: the API never
        # imports user code, it reads the manifest of what the workers serve.
        self.handler_layer: lambda_.LayerVersion | None = None
        if ctx.handler_code.path is not None:
            self.handler_layer = lambda_.LayerVersion(
                self,
                "HandlerLayer",
                code=lambda_.Code.from_asset(str(stage_layer(ctx.handler_code)), exclude=LAYER_EXCLUDES),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description=f"duetime handlers from {ctx.handler_code.path.name}/ ({ctx.handler_code.modules_env})",
            )
        self.ctx = ctx
        self.environment = stack_environment(ctx, queues)
        grants = grants_environment(ctx.handler_grants)
        tables = storage.tables
        every_due = [due for q in queues.by_class.values() for due in q.every_due]
        every_dlq = [q.dlq for q in queues.by_class.values()]

        self.api = self._function(
            FunctionSpec("api", "duetime HTTP API", Duration.seconds(API_FUNCTION_TIMEOUT_SECONDS)),
            extra_env={
                **api_handler_environment(ctx.handler_code, ctx.handler_grants),
                **quota_environment(ctx.quotas),
            },
            # Kept for the API whatever the workers do: a burst of due executions cannot starve owners' calls.
            reserved_concurrency=ctx.api_reserved_concurrency or None,
        )
        grant_tables(self.api.role, tables, API_TABLE_ACTIONS)  # type: ignore[arg-type]
        # Creating a job sends its first execution when due soon; completing one may retry or dead-letter it.
        grant_queues(self.api.role, every_due + every_dlq, SEND)  # type: ignore[arg-type]

        interval = ctx.settings.preload_interval_seconds
        self.preloader = self._function(
            FunctionSpec("preloader", "duetime pre-loader: sends due executions to SQS", Duration.seconds(interval)),
            reserved_concurrency=preloader_reserved_concurrency(ctx.preload_shard_groups),
            async_retries=SCHEDULED_ASYNC_RETRIES,
        )
        grant_tables(self.preloader.role, tables, PRELOADER_TABLE_ACTIONS)  # type: ignore[arg-type]
        grant_queues(self.preloader.role, every_due, SEND)  # type: ignore[arg-type]
        # Its reconciler sends a failure notice again to the DLQ of the execution's class.
        grant_queues(self.preloader.role, every_dlq, SEND)  # type: ignore[arg-type]

        self.workers: dict[str, lambda_.Function] = {}
        for name, class_queues in queues.by_class.items():
            if class_queues.job_class.worker_kind != "lambda":
                continue
            # One function per due queue of the class (Lambda runs at most ~1,000 batches of one event
            # source at once): queue 0's keeps the id it always had, so an existing stack keeps its function.
            for index, due in enumerate(class_queues.every_due):
                suffix = "" if index == 0 else f"-{index}"
                worker = self._function(
                    FunctionSpec(
                        "worker",
                        f"duetime worker of the {name!r} job class"
                        + (f", due queue {index}" if class_queues.more_due else ""),
                        lambda_worker_timeout(class_queues.job_class),
                    ),
                    construct_id=f"Worker-{name}{suffix}",
                    job_class=name,
                    extra_env=grants,
                    extra_layers=[self.handler_layer] if self.handler_layer else [],
                    # As many as its event source may start: the workers' burst has a ceiling the API never meets.
                    reserved_concurrency=ctx.worker_max_concurrency,
                )
                grant_webhook_secrets(worker.role, ctx.settings.prefix)  # type: ignore[arg-type]
                grant_tables(worker.role, tables, WORKER_TABLE_ACTIONS)  # type: ignore[arg-type]
                # Its own queue to consume; every queue of the class to send to (retries and limit
                # re-sends go to the queue of the execution's shard, which may be another).
                grant_queues(worker.role, [due], [*CONSUME, *SEND])  # type: ignore[arg-type]
                if others := [q for q in class_queues.every_due if q is not due]:
                    grant_queues(worker.role, others, SEND)  # type: ignore[arg-type]
                grant_queues(worker.role, [class_queues.dlq], SEND)  # type: ignore[arg-type]
                worker.add_event_source(
                    sources.SqsEventSource(
                        due,
                        batch_size=WORKER_BATCH_SIZE,
                        max_batching_window=Duration.seconds(WORKER_BATCHING_WINDOW_SECONDS),
                        report_batch_item_failures=True,
                        max_concurrency=ctx.worker_max_concurrency,
                    )
                )
                self.workers[f"{name}{suffix}"] = worker

        self.dlq_notifier = self._function(
            FunctionSpec(
                "dlq_notifier",
                "duetime DLQ notifier: records dead letters, tells owners",
                Duration.seconds(DLQ_NOTIFIER_TIMEOUT_SECONDS),
            ),
            alert_topic_arn=alert_topic.topic_arn,
            reserved_concurrency=RUNS_PER_SCHEDULE,  # one rule, whatever the shard groups
            async_retries=SCHEDULED_ASYNC_RETRIES,
        )
        grant_tables(self.dlq_notifier.role, tables, DLQ_NOTIFIER_TABLE_ACTIONS)  # type: ignore[arg-type]
        grant_queues(self.dlq_notifier.role, every_dlq, DRAIN)  # type: ignore[arg-type]
        alert_topic.grant_publish(self.dlq_notifier)  # with kms:Decrypt and kms:GenerateDataKey* on its key
        suppress(
            self.dlq_notifier.role,  # type: ignore[arg-type]
            {
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "Granted by Topic.grantPublish on the alert "
                "topic's own key only: publishing to an encrypted topic needs a data key of that key.",
            },
        )

    @property
    def all(self) -> list[lambda_.Function]:
        return [self.api, self.preloader, *self.workers.values(), self.dlq_notifier]

    def _function(
        self,
        spec: FunctionSpec,
        construct_id: str | None = None,
        job_class: str | None = None,
        alert_topic_arn: str | None = None,
        extra_env: dict[str, str] | None = None,
        extra_layers: list[lambda_.LayerVersion] | None = None,
        reserved_concurrency: int | None = None,
        async_retries: int | None = None,
    ) -> lambda_.Function:
        construct_id = construct_id or "".join(part.capitalize() for part in spec.name.split("_"))
        logs = log_group(self, f"{construct_id}Logs", self.ctx.log_retention_days, self.key)
        role = iam.Role(
            self,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),  # type: ignore[arg-type]
            description=f"duetime {spec.name}: only what its handler calls",
        )
        logs.grant_write(role)
        grant_key_use(role, self.key)  # its tables, queues and environment are encrypted with the data key
        function = lambda_.Function(
            self,
            construct_id,
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="index.handler",
            code=lambda_.Code.from_asset(str(ROOT / "functions" / spec.name), exclude=ASSET_EXCLUDES),
            layers=[self.deps_layer, self.core_layer, *(extra_layers or [])],
            environment={
                **function_environment(
                    spec.name,
                    self.environment,
                    job_class=job_class,
                    handler_modules=self.ctx.handler_modules,
                    alert_topic_arn=alert_topic_arn,
                ),
                **(extra_env or {}),
            },
            timeout=spec.timeout,
            memory_size=FUNCTION_MEMORY_MB[spec.name],
            role=role,  # type: ignore[arg-type]
            log_group=logs,  # type: ignore[arg-type]
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            reserved_concurrent_executions=reserved_concurrency,
            retry_attempts=async_retries,
            environment_encryption=self.key,
        )
        # On the role's own policy only, where tracing put the X-Ray statement: a policy attached apart
        # (grant_handler_targets) answers for its findings itself.
        suppress(role.node.find_child("DefaultPolicy"), {"AwsSolutions-IAM5[Resource::*]": XRAY_WILDCARD})
        suppress(
            function,
            {"AwsSolutions-L1": "Python 3.12 on purpose: the dependency layer's binary wheels are built for cp312."},
        )
        return function
