"""DuetimeStack: storage, queues, functions and layers, api, workers, scheduling and monitoring, assembled."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Stack
from constructs import Construct
from duetime.config import RuntimeConfig

from infra.api import Api
from infra.console import Console
from infra.context import DeployContext
from infra.encryption import data_key
from infra.events import EventBus, grant_owner_destinations
from infra.functions import Functions
from infra.handlers import HandlerCode
from infra.monitoring import AlertTopic, Monitoring
from infra.permissions import grant_handler_targets, grant_task_payload_reads, grant_webhook_secrets
from infra.queues import Queues
from infra.scheduling import Scheduling
from infra.smoke_target import SmokeTarget
from infra.storage import Storage
from infra.workers import Workers


class DuetimeStack(Stack):
    """Everything duetime runs on, named and tuned from CDK context (infra/context.py).

    A team's own CDK app passes its handler code as parameters instead of context: `handler_path` (the
    folder holding its packages), `handler_modules` (what the workers import) and `handler_grants`
    (which owners may use which handlers; a JSON string or the parsed value). Given, they win over context.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_path: str | Path | None = None,
        handler_modules: Sequence[str] | None = None,
        handler_grants: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.ctx = with_handlers(DeployContext.from_node(self.node), handler_path, handler_modules, handler_grants)
        # Context kmsKey: one customer-managed key for tables, queues, topic and logs; AWS managed keys without.
        self.data_key = data_key(self, self.ctx.kms_key)
        self.storage = Storage(
            self, "Storage", settings=self.ctx.settings, key=self.data_key, provisioned=self.ctx.provisioned
        )
        self.queues = Queues(self, "Queues", settings=self.ctx.settings, key=self.data_key)
        self.alerts = AlertTopic(self, "Alerts", ctx=self.ctx, key=self.data_key)
        self.functions = Functions(
            self,
            "Functions",
            ctx=self.ctx,
            storage=self.storage,
            queues=self.queues,
            alert_topic=self.alerts.topic,
            key=self.data_key,
        )
        # Context eventBus: terminal runs and job changes as events; every function and worker publishes.
        self.events = EventBus(self, "Events", ctx=self.ctx)
        self.functions.environment.update(self.events.environment())  # the ECS workers' environment too
        for function in self.functions.all:
            for name, value in self.events.environment().items():
                function.add_environment(name, value)
        self.events.grant_publish([fn.role for fn in self.functions.all if fn.role is not None])
        # Context smokeTarget (default on): `duetime smoke`'s `lambda:` target, granted to its owners only.
        self.smoke_target = (
            SmokeTarget(self, "SmokeTarget", ctx=self.ctx, key=self.data_key) if self.ctx.smoke_target else None
        )
        if self.smoke_target is not None:
            smoke = RuntimeConfig(smoke_target=self.smoke_target.function_name).to_env()
            self.functions.environment.update(smoke)  # the ECS workers' environment too
            for function in self.functions.all:
                for name, value in smoke.items():
                    function.add_environment(name, value)
        # Owners' failure destinations: their duetime-notify-* topics, per-owner mail topics, signed webhooks.
        assert self.functions.dlq_notifier.role is not None
        grant_owner_destinations(self.functions.dlq_notifier.role, self.ctx)
        grant_webhook_secrets(self.functions.dlq_notifier.role, self.ctx.settings.prefix)
        self.api = Api(self, "Api", ctx=self.ctx, function=self.functions.api, key=self.data_key)
        self.workers = Workers(
            self,
            "Workers",
            ctx=self.ctx,
            storage=self.storage,
            queues=self.queues,
            environment=self.functions.environment,
            key=self.data_key,
        )
        # Lambda workers run `lambda:` and `ecs:` handlers too; ECS tasks start in the workers' cluster.
        for worker in self.functions.workers.values():
            assert worker.role is not None
            grant_handler_targets(
                worker.role,
                self.ctx.lambda_targets,
                self.ctx.handler_task_definitions,
                self.workers.cluster.cluster_arn,
                self.ctx.handler_task_roles,
                self.ctx.handler_execution_roles,
            )
            for name, value in self.workers.handler_target_environment().items():
                worker.add_environment(name, value)
        self.events.grant_publish(self.workers.task_roles)
        # `ecs:` handler tasks are handed their job id and read their payload themselves.
        self.task_payload_reads = grant_task_payload_reads(
            self, self.ctx.handler_task_roles, self.storage.tables["jobs"], self.data_key
        )
        self.api.admit_workers(
            [fn.role for fn in self.functions.workers.values() if fn.role is not None] + list(self.workers.task_roles)
        )
        # Context console=true: the web console on S3 and CloudFront, signing in through the user pool.
        self.console = (
            Console(self, "Console", ctx=self.ctx, user_pool=self.api.user_pool, rest_api=self.api.rest_api)
            if self.ctx.console
            else None
        )
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


def with_handlers(
    ctx: DeployContext, path: str | Path | None, modules: Sequence[str] | None, grants: Any
) -> DeployContext:
    """`ctx` with the handler code and grants a team's app passed as parameters in place of context."""
    code = HandlerCode(
        path=Path(path).resolve() if path is not None else ctx.handler_code.path,
        modules=list(modules) if modules is not None else ctx.handler_code.modules,
    )
    if grants is not None and not isinstance(grants, str):
        grants = json.dumps(grants, separators=(",", ":"), sort_keys=True)
    return dataclasses.replace(ctx, handler_code=code, handler_grants=grants or ctx.handler_grants)
