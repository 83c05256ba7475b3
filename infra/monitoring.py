"""Monitoring: the alarm topic (email from context), the alarms of issue 6 and a dashboard.

The metrics the code emits (named in duetime.definitions): start lateness with dimension service=worker (the
workers), executions dispatched and shard errors with service=preloader (Powertools Metrics in
functions/preloader), events EventBridge refused and owners' notices not taken with the emitting function's
Powertools service name (duetime.event_sinks.emf_count).
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct
from duetime.definitions import (
    METRIC_DISPATCHED,
    METRIC_EVENTS_FAILED,
    METRIC_NAMESPACE,
    METRIC_NOTICES_FAILED,
    METRIC_OWNER_DIMENSION,
    METRIC_RUNS_LATE,
    METRIC_SHARD_ERRORS,
    METRIC_START_LATENESS_MS,
    PRELOADER_METRICS_SERVICE,
    WORKER_METRICS_SERVICE,
)

from infra.context import DeployContext
from infra.queues import Queues

NAMESPACE = METRIC_NAMESPACE
LATENESS_METRIC = METRIC_START_LATENESS_MS
LATENESS_DIMENSIONS = {"service": WORKER_METRICS_SERVICE}
LATENESS_P99_THRESHOLD_MS = 2000  # docs/architecture.md: an execution starts within 2 s of its time at p99
MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)


def lateness(statistic: str, label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=LATENESS_METRIC,
        dimensions_map=LATENESS_DIMENSIONS,
        statistic=statistic,
        period=MINUTE,
        label=label,
    )


def _count(metric_name: str, services: list[str]) -> cloudwatch.IMetric:
    """The sum over five minutes of a count duetime emits, over the service dimensions that emit it."""
    metrics = {
        f"m{index}": cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"service": service},
            statistic="Sum",
            period=FIVE_MINUTES,
        )
        for index, service in enumerate(services)
    }
    if len(metrics) == 1:
        return metrics["m0"]
    return cloudwatch.MathExpression(
        # FILL: a service that counted nothing has no datapoint, which would leave the sum empty.
        expression=" + ".join(f"FILL({m}, 0)" for m in metrics),
        using_metrics=metrics,  # type: ignore[arg-type]
        period=FIVE_MINUTES,
        label=f"{metric_name} (all functions)",
    )


class AlertTopic(Construct):
    """The SNS topic alarms and the DLQ notifier publish to, encrypted with a key CloudWatch may use: the
    stack's data key (context kmsKey, whose policy admits CloudWatch) or a key of its own."""

    def __init__(self, scope: Construct, construct_id: str, *, ctx: DeployContext, key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        self.key = key or self._own_key()
        self.topic = sns.Topic(self, "Topic", display_name="duetime alarms", master_key=self.key, enforce_ssl=True)
        if ctx.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(ctx.alarm_email))

    def _own_key(self) -> kms.Key:
        key = kms.Key(self, "Key", enable_key_rotation=True, description="duetime alarm topic")
        # CloudWatch alarms publish to an encrypted topic only with a customer managed key they may use.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        return key


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: DeployContext,
        topic: sns.ITopic,
        queues: Queues,
        functions: dict[str, lambda_.Function],
        rest_api: apigw.RestApi,
        services: dict[str, ecs.FargateService],
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self._action = actions.SnsAction(topic)  # type: ignore[arg-type]
        settings = ctx.settings
        prefix = settings.prefix

        for name, class_queues in queues.by_class.items():
            self._alarm(
                f"DlqDepth-{name}",
                f"{prefix}: dead letters waiting in the {name!r} DLQ",
                class_queues.dlq.metric_approximate_number_of_messages_visible(period=MINUTE, statistic="Maximum"),
                threshold=0,
            )
            # The DLQ notifier drains every minute, so depth alone may never be sampled above zero: any
            # receive from a DLQ (only the notifier receives there) means an execution ended in the DLQ.
            self._alarm(
                f"DeadLetters-{name}",
                f"{prefix}: executions of the {name!r} class reached the DLQ",
                class_queues.dlq.metric_number_of_messages_received(period=FIVE_MINUTES, statistic="Sum"),
                threshold=0,
            )
            # A due message becomes visible when due and should be received within seconds; older than the
            # window (its longest delay) plus a pre-load interval and a lease means no worker takes it.
            oldest_allowed = (
                settings.preload_window_seconds
                + settings.preload_interval_seconds
                + class_queues.job_class.lease_seconds
            )
            # One alarm per due queue of a spread class (queue 0's keeps its id): any queue left unread alarms.
            for index, due in enumerate(class_queues.every_due):
                self._alarm(
                    f"OldestDueMessage-{name}" + (f"-{index}" if index else ""),
                    f"{prefix}: the {name!r} due queue{f' {index}' if class_queues.more_due else ''} holds a "
                    f"message older than {oldest_allowed} s",
                    due.metric_approximate_age_of_oldest_message(period=MINUTE, statistic="Maximum"),
                    threshold=oldest_allowed,
                    evaluation_periods=3,
                )

        self._alarm(
            "StartLatenessP99",
            f"{prefix}: start lateness p99 above {LATENESS_P99_THRESHOLD_MS} ms",
            lateness("p99"),
            threshold=LATENESS_P99_THRESHOLD_MS,
            evaluation_periods=3,
        )
        for name, function in functions.items():
            self._alarm(
                f"Errors-{name}",
                f"{prefix}: the {name} function failed",
                function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                threshold=0,
            )
            self._alarm(
                f"Throttles-{name}",
                f"{prefix}: the {name} function was throttled",
                function.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                threshold=0,
            )
        # A shard whose pre-load failed is not dispatched that minute (and never again while the failure lasts):
        # nothing else shows it (issue 29: a denied UpdateItem aborted 1/32 of all jobs).
        self._alarm(
            "ShardErrors",
            f"{prefix}: a pre-load shard failed",
            _count(METRIC_SHARD_ERRORS, [PRELOADER_METRICS_SERVICE]),
            threshold=0,
        )
        # Each function counts what it emits under its Powertools service name (config.function_environment:
        # the function's name, "worker" for every worker function).
        function_services = sorted({"worker" if name.startswith("worker_") else name for name in functions})
        self._alarm(
            "EventsFailed",
            f"{prefix}: EventBridge refused events",
            _count(METRIC_EVENTS_FAILED, function_services),
            threshold=0,
        )
        # Only the DLQ notifier tells owners (the alert topic is in its environment only).
        self._alarm(
            "NoticesFailed",
            f"{prefix}: an owner's failure notice was not delivered",
            _count(METRIC_NOTICES_FAILED, ["dlq_notifier"]),
            threshold=0,
        )
        # Each owner the stack names in its lateness metrics (context metricOwners): an alarm when one of its
        # runs starts late (its destinations are told run by run; this tells the operator, $0.10 a month each).
        for index, owner in enumerate(settings.metric_owners):
            self._alarm(
                f"RunsLate-{index}",
                f"{prefix}: a run of owner {owner!r} started past its lateAfterSeconds",
                cloudwatch.Metric(
                    namespace=NAMESPACE,
                    metric_name=METRIC_RUNS_LATE,
                    dimensions_map={METRIC_OWNER_DIMENSION: owner},
                    period=FIVE_MINUTES,
                    statistic="Sum",
                ),
                threshold=0,
            )
        self._alarm(
            "Api5xx",
            f"{prefix}: the API answered 5xx",
            rest_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            threshold=0,
        )
        self.dashboard = self._dashboard(prefix, queues, functions, rest_api, services)

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        evaluation_periods: int = 1,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def _dashboard(
        self,
        prefix: str,
        queues: Queues,
        functions: dict[str, lambda_.Function],
        rest_api: apigw.RestApi,
        services: dict[str, ecs.FargateService],
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{prefix}-overview")
        # A completed execution deletes its due message: deletes per second are executions per second.
        # (every due queue of a spread class)
        every_due = [
            (name if index == 0 else f"{name}-{index}", due)
            for name, q in queues.by_class.items()
            for index, due in enumerate(q.every_due)
        ]
        completed = {
            f"c{i}": due.metric_number_of_messages_deleted(period=MINUTE, statistic="Sum")
            for i, (_, due) in enumerate(every_due)
        }
        executions_per_second = cloudwatch.MathExpression(
            expression=f"({' + '.join(completed)}) / PERIOD(c0)",
            using_metrics=completed,  # type: ignore[arg-type]
            label="executions/s (all classes)",
            period=MINUTE,
        )
        dispatched = cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=METRIC_DISPATCHED,
            dimensions_map={"service": PRELOADER_METRICS_SERVICE},
            statistic="Sum",
            period=MINUTE,
            label="dispatched by the pre-loader / min",
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Executions per second", left=[executions_per_second], right=[dispatched], width=12
            ),
            cloudwatch.GraphWidget(
                title="Start lateness (ms)",
                left=[lateness(p, label=f"start lateness {p}") for p in ("p50", "p90", "p99")],
                left_annotations=[cloudwatch.HorizontalAnnotation(value=LATENESS_P99_THRESHOLD_MS, label="p99 SLO")],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="DLQ depth",
                left=[
                    q.dlq.metric_approximate_number_of_messages_visible(period=MINUTE, label=name)
                    for name, q in queues.by_class.items()
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Due queues: visible and oldest (s)",
                left=[
                    due.metric_approximate_number_of_messages_visible(period=MINUTE, label=f"{name} visible")
                    for name, due in every_due
                ],
                right=[
                    due.metric_approximate_age_of_oldest_message(period=MINUTE, label=f"{name} oldest")
                    for name, due in every_due
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="API",
                left=[rest_api.metric_count(period=MINUTE), rest_api.metric_server_error(period=MINUTE)],
                right=[rest_api.metric_latency(period=MINUTE, statistic="p99")],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function errors and throttles",
                left=[f.metric_errors(period=MINUTE, label=f"{n} errors") for n, f in functions.items()],
                right=[f.metric_throttles(period=MINUTE, label=f"{n} throttles") for n, f in functions.items()],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="ECS workers",
                left=[s.metric_cpu_utilization(period=MINUTE, label=f"{n} CPU %") for n, s in services.items()],
                width=12,
            ),
        )
        return dashboard
