"""Runtime configuration from the environment (checked at cold start) and the wiring of ports from it."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, Field, model_validator

from duetime.definitions import (
    DEFAULT_JOB_CREATES_PER_MINUTE,
    DEFAULT_MAX_ACTIVE_JOBS,
    DEFAULT_RUN_NOWS_PER_MINUTE,
    LOCAL_SETTINGS,
    PRELOAD_DISPATCH_THREADS,
    PRELOAD_THREADS,
    Settings,
    preload_window_problem,
)
from duetime.domain.grants import DEMO_ONLY, EVERYONE, Grants
from duetime.domain.quotas import Quotas
from duetime.queue.notify import ConsoleNotifier, SnsNotifier
from duetime.queue.sqs import DueQueues
from duetime.queue.targets import EcsSettings, EcsTarget, LambdaTarget
from duetime.queue.webhook import WebhookTarget
from duetime.service.context import Notifier, Ports
from duetime.store.aws import make_client
from duetime.store.dynamo import DynamoStore
from duetime.store.secrets import FileSecrets, SecretsManagerSecrets, WebhookSecrets
from duetime.worker.kinds import Targets

# Environment variables holding JSON rather than plain text.
JSON_FIELDS = ("queue_urls", "dlq_urls", "handler_grants", "handler_manifest")


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
    jwt_audience: str | None = None  # `duetime local`: its data dir's instance id, which its tokens name
    ecs_cluster: str | None = None
    ecs_subnets: str = ""  # comma-separated
    ecs_security_groups: str = ""  # comma-separated
    # Grant rules as JSON ([{"owners": [...], "handlers": [...]}]); unset: everyone may use the demo
    # handlers only on AWS, everything locally (an endpoint_url means local).
    handler_grants: list[dict[str, Any]] | None = None
    # {jobClass: [handler names]} the deployment's workers import (generated at synth).
    handler_manifest: dict[str, list[str]] | None = None
    # Per-owner quotas (0: unlimited); unset: the DEFAULT_* of definitions.py on AWS, none locally.
    max_active_jobs: int | None = Field(default=None, ge=0)
    job_creates_per_minute: int | None = Field(default=None, ge=0)
    run_nows_per_minute: int | None = Field(default=None, ge=0)
    # Webhook secrets as files in this folder (`duetime local`, `duetime worker --data-dir`); else Secrets Manager.
    webhook_secrets_dir: str | None = None

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
            values[name] = json.loads(raw) if name in JSON_FIELDS else raw
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
            allow_loopback_webhooks=base.allow_loopback_webhooks,
        )
        return settings.with_lease_seconds(self.lease_seconds) if self.lease_seconds else settings

    def grants(self) -> Grants:
        """The grant rules configured, or the default: everything locally, the demo handlers on AWS."""
        if self.handler_grants is not None:
            return Grants.parse(self.handler_grants, source="DUETIME_HANDLER_GRANTS")
        return EVERYONE if self.endpoint_url else DEMO_ONLY

    def quotas(self) -> Quotas:
        """Each owner's limits: those configured (0: unlimited), else the defaults on AWS and none locally."""

        def limit(configured: int | None, default: int) -> int | None:
            if configured is None:
                return None if self.endpoint_url else default
            return configured or None

        return Quotas(
            max_active_jobs=limit(self.max_active_jobs, DEFAULT_MAX_ACTIVE_JOBS),
            job_creates_per_minute=limit(self.job_creates_per_minute, DEFAULT_JOB_CREATES_PER_MINUTE),
            run_nows_per_minute=limit(self.run_nows_per_minute, DEFAULT_RUN_NOWS_PER_MINUTE),
        )

    def manifest(self) -> dict[str, frozenset[str]]:
        return {job_class: frozenset(names) for job_class, names in (self.handler_manifest or {}).items()}


def runtime_environment(
    settings: Settings, region: str, queue_urls: str, dlq_urls: str, lease_seconds: int | None = None
) -> dict[str, str]:
    """The DUETIME_* variables RuntimeConfig.from_env reads, shared by every function and the `long` worker:
    written here once for the CDK stack and the local Lambda emulation. `queue_urls` and `dlq_urls` are JSON
    objects by job class (CDK passes tokens that resolve to them at deploy time)."""
    env = {
        "DUETIME_PREFIX": settings.prefix,
        "DUETIME_REGION": region,
        "DUETIME_SHARDS": str(settings.shards),
        "DUETIME_PRELOAD_INTERVAL_SECONDS": str(settings.preload_interval_seconds),
        "DUETIME_PRELOAD_WINDOW_SECONDS": str(settings.preload_window_seconds),
        "DUETIME_HISTORY_RETENTION_DAYS": str(settings.history_retention_days),
        "DUETIME_QUEUE_URLS": queue_urls,
        "DUETIME_DLQ_URLS": dlq_urls,
        "POWERTOOLS_METRICS_NAMESPACE": "duetime",
    }
    if lease_seconds is not None:
        env["DUETIME_LEASE_SECONDS"] = str(lease_seconds)
    return env


def quota_environment(quotas: Quotas) -> dict[str, str]:
    """The API function's DUETIME_* quota variables (0: unlimited), as RuntimeConfig.quotas reads them."""
    return {
        "DUETIME_MAX_ACTIVE_JOBS": str(quotas.max_active_jobs or 0),
        "DUETIME_JOB_CREATES_PER_MINUTE": str(quotas.job_creates_per_minute or 0),
        "DUETIME_RUN_NOWS_PER_MINUTE": str(quotas.run_nows_per_minute or 0),
    }


def function_environment(
    function: str,
    shared: dict[str, str],
    job_class: str | None = None,
    handler_modules: str = "",
    alert_topic_arn: str | None = None,
) -> dict[str, str]:
    """One function's environment: the shared variables, its Powertools service name, the worker's job
    class and handler modules, the DLQ notifier's alert topic."""
    env = {**shared, "POWERTOOLS_SERVICE_NAME": function}
    if job_class is not None:
        env.update(DUETIME_JOB_CLASS=job_class, DUETIME_HANDLER_MODULES=handler_modules)
    if alert_topic_arn is not None:
        env["DUETIME_ALERT_TOPIC_ARN"] = alert_topic_arn
    return env


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
    return Ports(
        store=DynamoStore(dynamodb, settings),
        queues=queues,
        settings=settings,
        notifier=notifier,
        grants=config.grants(),
        handler_manifest=config.manifest(),
        quotas=config.quotas(),
    )


def build_webhook_secrets(config: RuntimeConfig) -> WebhookSecrets:
    """Owners' webhook secrets: files under `webhook_secrets_dir` when set, else Secrets Manager."""
    if config.webhook_secrets_dir:
        return FileSecrets(config.webhook_secrets_dir)
    return SecretsManagerSecrets.lazy(
        lambda: make_client("secretsmanager", config.region, config.endpoint_url), config.prefix
    )


def build_targets(config: RuntimeConfig) -> Targets:
    """Where `lambda:`, `ecs:` and webhook handlers run: Lambda always, ECS when a cluster is configured,
    webhooks signed with secrets from build_webhook_secrets."""
    ecs = None
    if config.ecs_cluster:
        settings = EcsSettings(
            cluster=config.ecs_cluster,
            subnets=[s for s in config.ecs_subnets.split(",") if s],
            security_groups=[s for s in config.ecs_security_groups.split(",") if s],
            prefix=config.prefix,
            region=config.region,
        )
        ecs = EcsTarget(make_client("ecs", config.region, config.endpoint_url), settings)
    lambda_target = LambdaTarget(make_client("lambda", config.region, config.endpoint_url))
    webhook = WebhookTarget(build_webhook_secrets(config), allow_loopback=config.settings().allow_loopback_webhooks)
    return Targets(lambda_target=lambda_target, ecs_target=ecs, webhook_target=webhook)
