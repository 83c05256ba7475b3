"""DuetimeStack: storage, queues, functions and layers, api, workers, scheduling and monitoring, assembled."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.api import Api
from infra.context import DeployContext
from infra.functions import Functions
from infra.monitoring import AlertTopic, Monitoring
from infra.permissions import grant_handler_targets
from infra.queues import Queues
from infra.scheduling import Scheduling
from infra.storage import Storage
from infra.workers import Workers


class DuetimeStack(Stack):
    """Everything duetime runs on, named and tuned from CDK context (infra/context.py)."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.ctx = DeployContext.from_node(self.node)
        self.storage = Storage(self, "Storage", settings=self.ctx.settings)
        self.queues = Queues(self, "Queues", settings=self.ctx.settings)
        self.alerts = AlertTopic(self, "Alerts", ctx=self.ctx)
        self.functions = Functions(
            self, "Functions", ctx=self.ctx, storage=self.storage, queues=self.queues, alert_topic=self.alerts.topic
        )
        self.api = Api(self, "Api", ctx=self.ctx, function=self.functions.api)
        self.workers = Workers(
            self,
            "Workers",
            ctx=self.ctx,
            storage=self.storage,
            queues=self.queues,
            environment=self.functions.environment,
        )
        # Lambda workers run `lambda:` and `ecs:` handlers too; ECS tasks start in the workers' cluster.
        for worker in self.functions.workers.values():
            assert worker.role is not None
            grant_handler_targets(
                worker.role,
                self.ctx.handler_functions,
                self.ctx.handler_task_definitions,
                self.workers.cluster.cluster_arn,
            )
            for name, value in self.workers.handler_target_environment().items():
                worker.add_environment(name, value)
        self.scheduling = Scheduling(
            self,
            "Scheduling",
            settings=self.ctx.settings,
            preloader=self.functions.preloader,
            dlq_notifier=self.functions.dlq_notifier,
            shard_groups=self.ctx.preload_shard_groups,
        )
        functions = {
            "api": self.functions.api,
            "preloader": self.functions.preloader,
            "dlq_notifier": self.functions.dlq_notifier,
            **{f"worker_{name}": fn for name, fn in self.functions.workers.items()},
        }
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            ctx=self.ctx,
            topic=self.alerts.topic,
            queues=self.queues,
            functions=functions,
            rest_api=self.api.rest_api,
            services=self.workers.services,
        )
