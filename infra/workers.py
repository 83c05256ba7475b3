"""Workers: the ECS Fargate service running `duetime worker` for each job class whose worker_kind is "ecs"
(the `long` class), in private subnets, scaled on its due queues' backlog."""

from __future__ import annotations

from aws_cdk import Duration, Fn, IgnoreMode
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct
from duetime.config import RuntimeConfig

from infra.common import log_group, suppress
from infra.context import DeployContext
from infra.encryption import grant_key_use
from infra.handlers import IMAGE_HANDLER_DIR, grants_environment, stage_image_context
from infra.permissions import (
    CONSUME,
    SEND,
    WORKER_TABLE_ACTIONS,
    grant_handler_targets,
    grant_queues,
    grant_tables,
    grant_webhook_secrets,
)
from infra.queues import Queues
from infra.storage import Storage

# The Docker build context is staged (infra/handlers.py): what `pip install .` needs plus the handler folder.
IMAGE_CONTEXT_EXCLUDES = ["**/__pycache__", "**/*.egg-info"]
# `duetime worker` finishes its running executions within this grace and releases the rest (SIGTERM).
STOP_GRACE_SECONDS = 30


class Workers(Construct):
    """One Fargate service per ECS job class, with its task role holding only what the worker calls."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: DeployContext,
        storage: Storage,
        queues: Queues,
        environment: dict[str, str],
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.task_roles: list[iam.Role] = []
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="workers", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22),
            ],
            gateway_endpoints={
                "DynamoDb": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
            },
        )
        self.vpc.add_flow_log(
            "FlowLogs",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                log_group(self, "FlowLogGroup", ctx.log_retention_days, key)
            ),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )
        # The team's handler folder is copied into the image (Dockerfile: HANDLER_DIR, on PYTHONPATH).
        image = ecs.ContainerImage.from_asset(
            str(stage_image_context(ctx.handler_code)),
            file="Dockerfile",
            build_args={"HANDLER_DIR": IMAGE_HANDLER_DIR},
            platform=ecr_assets.Platform.LINUX_ARM64,
            exclude=IMAGE_CONTEXT_EXCLUDES,
            ignore_mode=IgnoreMode.DOCKER,
        )
        # `ecs:` handler tasks' own group: without one RunTask puts them in the VPC's default group, which
        # restrictDefaultSecurityGroup strips of every rule (no egress: the image cannot even be pulled). HTTPS
        # out reaches ECR, S3 (image layers), DynamoDB (the payload read) and the AWS APIs; nothing comes in.
        # (The VPC's resolver answers DNS whatever the group says.) A team adds rules for what else its tasks call.
        self.handler_tasks_group: ec2.SecurityGroup | None = None
        if ctx.handler_task_definitions:
            self.handler_tasks_group = ec2.SecurityGroup(
                self,
                "HandlerTasks",
                vpc=self.vpc,
                description="duetime ecs: handler tasks: HTTPS out, nothing in",
                allow_all_outbound=False,
            )
            self.handler_tasks_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS: ECR, S3, AWS APIs")
        self.services: dict[str, ecs.FargateService] = {}
        for name, class_queues in queues.by_class.items():
            job_class = class_queues.job_class
            if job_class.worker_kind != "ecs":
                continue
            task_role = iam.Role(
                self,
                f"TaskRole-{name}",
                assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),  # type: ignore[arg-type]
                description=f"duetime worker of the {name!r} job class: only what `duetime worker` calls",
            )
            grant_tables(task_role, storage.tables, WORKER_TABLE_ACTIONS)
            grant_queues(task_role, class_queues.every_due, [*CONSUME, *SEND])
            grant_queues(task_role, [class_queues.dlq], SEND)
            grant_handler_targets(
                task_role,
                ctx.lambda_targets,
                ctx.handler_task_definitions,
                self.cluster.cluster_arn,
                ctx.handler_task_roles,
                ctx.handler_execution_roles,
            )
            grant_webhook_secrets(task_role, ctx.settings.prefix)
            grant_key_use(task_role, key)
            self.task_roles.append(task_role)
            task = ecs.FargateTaskDefinition(
                self,
                f"Task-{name}",
                cpu=512,
                memory_limit_mib=1024,
                task_role=task_role,  # type: ignore[arg-type]
                runtime_platform=ecs.RuntimePlatform(
                    cpu_architecture=ecs.CpuArchitecture.ARM64,
                    operating_system_family=ecs.OperatingSystemFamily.LINUX,
                ),
            )
            task.add_container(
                "worker",
                image=image,
                command=[
                    "duetime",
                    "worker",
                    "--job-class",
                    name,
                    "--concurrency",
                    str(job_class.concurrency),
                    "--grace-seconds",
                    str(STOP_GRACE_SECONDS - 5),
                    *(["--handlers", *ctx.handler_code.modules] if ctx.handler_code.modules else []),
                ],
                environment={
                    **environment,
                    **self.handler_target_environment(),
                    **RuntimeConfig(job_class=name, handler_modules=ctx.handler_code.modules_env).to_env(),
                    **grants_environment(ctx.handler_grants),
                },
                logging=ecs.LogDriver.aws_logs(
                    stream_prefix=f"worker-{name}",
                    log_group=log_group(self, f"Logs-{name}", ctx.log_retention_days, key),
                ),
                stop_timeout=Duration.seconds(STOP_GRACE_SECONDS),
            )
            service = ecs.FargateService(
                self,
                f"Service-{name}",
                cluster=self.cluster,
                task_definition=task,
                desired_count=ctx.long_worker_min_tasks,
                vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                assign_public_ip=False,
                min_healthy_percent=100,
                max_healthy_percent=200,
                circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            )
            scaling = service.auto_scale_task_count(
                min_capacity=ctx.long_worker_min_tasks, max_capacity=ctx.long_worker_max_tasks
            )
            # Backlog: due messages visible and not yet received (on every queue of a spread class); each
            # task runs `concurrency` at once.
            visible = [
                due.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Maximum")
                for due in class_queues.every_due
            ]
            backlog: cloudwatch.IMetric = visible[0]
            if len(visible) > 1:
                backlog = cloudwatch.MathExpression(
                    expression="+".join(f"q{i}" for i in range(len(visible))),
                    using_metrics={f"q{i}": metric for i, metric in enumerate(visible)},
                    period=Duration.minutes(1),
                    label=f"{name}: visible on its {len(visible)} due queues",
                )
            scaling.scale_on_metric(
                "QueueBacklog",
                metric=backlog,
                scaling_steps=[
                    autoscaling.ScalingInterval(upper=0, change=-1),
                    autoscaling.ScalingInterval(lower=1, change=+1),
                    autoscaling.ScalingInterval(lower=job_class.concurrency * 4, change=+3),
                ],
                adjustment_type=autoscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                cooldown=Duration.minutes(2),
            )
            self.services[name] = service
            suppress(
                task,
                {
                    "AwsSolutions-ECS2": "The environment holds resource names and URLs only (no secrets): the "
                    "DUETIME_* settings RuntimeConfig.from_env reads.",
                    "AwsSolutions-IAM5[Resource::*]": "The execution role's ecr:GetAuthorizationToken, granted by CDK "
                    "to pull the image asset, takes no resource ARN.",
                },
            )

    def handler_target_environment(self) -> dict[str, str]:
        """Where `ecs:` handlers' tasks run: this cluster, in the workers' private subnets, in their own group."""
        subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids
        groups = {"ecs_security_groups": self.handler_tasks_group.security_group_id} if self.handler_tasks_group else {}
        return RuntimeConfig(
            ecs_cluster=self.cluster.cluster_name, ecs_subnets=Fn.join(",", subnets), **groups
        ).to_env()
