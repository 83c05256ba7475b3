"""Runtime configuration from the environment (checked at cold start) and the wiring of ports from it."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, Field, model_validator

from duetime.definitions import (
    LOCAL_SETTINGS,
    PRELOAD_DISPATCH_THREADS,
    PRELOAD_THREADS,
    Settings,
    preload_window_problem,
)
from duetime.queue.notify import ConsoleNotifier, SnsNotifier
from duetime.queue.sqs import DueQueues
from duetime.queue.targets import EcsSettings, EcsTarget, LambdaTarget
from duetime.service.context import Notifier, Ports
from duetime.store.aws import make_client
from duetime.store.dynamo import DynamoStore
from duetime.worker.kinds import Targets


class RuntimeConfig(BaseModel):
    """Where duetime's resources are and how it is tuned; CDK sets these as environment variables."""

    prefix: str = "duetime"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    shards: int = Field(default=32, ge=1, le=1024)
    preload_interval_seconds: int = Field(default=60, ge=1)
    preload_window_seconds: int = Field(default=300, ge=1, le=840)
    preload_threads: int = Field(default=PRELOAD_THREADS, ge=1, le=64)  # shards one invocation works on at once
    preload_dispatch_threads: int = Field(default=PRELOAD_DISPATCH_THREADS, ge=1, le=64)  # calls at once per shard
    history_retention_days: int = Field(default=30, ge=1)
    lease_seconds: int | None = Field(default=None, ge=3)
    queue_urls: dict[str, str] | None = None
    dlq_urls: dict[str, str] | None = None
    alert_topic_arn: str | None = None
    jwt_secret: str | None = None
    ecs_cluster: str | None = None
    ecs_subnets: str = ""  # comma-separated
    ecs_security_groups: str = ""  # comma-separated

    @model_validator(mode="after")
    def _preload_schedule(self) -> RuntimeConfig:
        """Refused at cold start: a window the pre-load interval cannot serve would start jobs late."""
        problem = preload_window_problem(self.preload_interval_seconds, self.preload_window_seconds)
        if problem:
            raise ValueError(problem)
        return self

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> RuntimeConfig:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = env.get(f"DUETIME_{name.upper()}")
            if raw is None:
                continue
            values[name] = json.loads(raw) if name in ("queue_urls", "dlq_urls") else raw
        return cls.model_validate(values)

    def settings(self) -> Settings:
        base = LOCAL_SETTINGS if self.endpoint_url else Settings()
        settings = Settings(
            prefix=self.prefix,
            shards=self.shards,
            preload_interval_seconds=self.preload_interval_seconds,
            preload_window_seconds=self.preload_window_seconds,
            history_retention_days=self.history_retention_days,
            job_classes=dict(base.job_classes),
        )
        return settings.with_lease_seconds(self.lease_seconds) if self.lease_seconds else settings


def build_ports(config: RuntimeConfig, notifier: Notifier | None = None) -> Ports:
    """Clients, adapters and the notifier, wired once per process."""
    settings = config.settings()
    dynamodb = make_client("dynamodb", config.region, config.endpoint_url)
    sqs = make_client("sqs", config.region, config.endpoint_url)
    if config.queue_urls and config.dlq_urls:
        queues = DueQueues(sqs, config.queue_urls, config.dlq_urls)
    else:
        queues = DueQueues.resolve(sqs, settings)
    if notifier is None:
        if config.alert_topic_arn:
            notifier = SnsNotifier(make_client("sns", config.region, config.endpoint_url), config.alert_topic_arn)
        else:
            notifier = ConsoleNotifier()
    return Ports(store=DynamoStore(dynamodb, settings), queues=queues, settings=settings, notifier=notifier)


def build_targets(config: RuntimeConfig) -> Targets:
    """Where `lambda:` and `ecs:` handlers run: Lambda always, ECS when a cluster is configured."""
    ecs = None
    if config.ecs_cluster:
        settings = EcsSettings(
            cluster=config.ecs_cluster,
            subnets=[s for s in config.ecs_subnets.split(",") if s],
            security_groups=[s for s in config.ecs_security_groups.split(",") if s],
        )
        ecs = EcsTarget(make_client("ecs", config.region, config.endpoint_url), settings)
    lambda_target = LambdaTarget(make_client("lambda", config.region, config.endpoint_url))
    return Targets(lambda_target=lambda_target, ecs_target=ecs)
