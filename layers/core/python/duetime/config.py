"""Runtime configuration: one pydantic-settings model, written to the environment by the CDK stack and the
local Lambda emulation (to_env) and read back by every function and worker at cold start (from_env); and the
wiring of ports from it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.queue import DueQueues, packing
from duetime.adapters.aws.secrets import FileSecrets, SecretsManagerSecrets, WebhookSecrets
from duetime.adapters.aws.store import DynamoStore
from duetime.definitions import (
    DEFAULT_BACKFILL_SLOTS_PER_HOUR,
    DEFAULT_JOB_CLASS,
    DEFAULT_JOB_CREATES_PER_MINUTE,
    DEFAULT_MAX_ACTIVE_JOBS,
    DEFAULT_REGION,
    DEFAULT_RUN_NOWS_PER_MINUTE,
    JOB_CLASSES,
    LOCAL_SETTINGS,
    METRIC_NAMESPACE,
    PRELOAD_DISPATCH_THREADS,
    PRELOAD_THREADS,
    SMOKE_OWNER_PREFIX,
    Settings,
    class_queues_problem,
    metric_owners_problem,
    preload_window_problem,
)
from duetime.domain.grants import DEMO_ONLY, EVERYONE, GrantRule, Grants
from duetime.domain.quotas import Quotas
from duetime.event_sinks import ConsoleEvents, EventBridgeEvents, emf_count, emf_owner_count
from duetime.notify import ConsoleNotifier, OwnerNotifier, SnsNotifier
from duetime.service.context import EventSink, Notifier, Ports
from duetime.targets.aws import LAMBDA_INVOKE_CONFIG, EcsSettings, EcsTarget, LambdaTarget
from duetime.targets.webhook import WebhookTarget
from duetime.worker.kinds import Targets

ENV_PREFIX = "DUETIME_"
# The shared tunables' defaults, stated once in definitions.Settings.
_DEFAULTS = Settings()


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (the process environment by default)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._environ.items()}


class RuntimeConfig(BaseSettings):
    """Where duetime's resources are and how it is tuned: each field is the variable DUETIME_<FIELD> (JSON for
    the lists and mappings). Constructed, it holds what it is given; from_env reads the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    prefix: str = _DEFAULTS.prefix
    region: str = DEFAULT_REGION
    endpoint_url: str | None = None
    # Locally: the access key id of the role this process runs as (duetime.local.iam checks its calls).
    local_identity: str | None = None
    shards: int = Field(default=_DEFAULTS.shards, ge=1, le=1024)
    preload_interval_seconds: int = Field(default=_DEFAULTS.preload_interval_seconds, ge=1)
    preload_window_seconds: int = Field(default=_DEFAULTS.preload_window_seconds, ge=1, le=840)
    preload_threads: int = Field(default=PRELOAD_THREADS, ge=1, le=64)  # shards one invocation works on at once
    preload_dispatch_threads: int = Field(default=PRELOAD_DISPATCH_THREADS, ge=1, le=64)  # calls at once per shard
    history_retention_days: int = Field(default=_DEFAULTS.history_retention_days, ge=1)
    lease_seconds: int | None = Field(default=None, ge=3)
    # Each class's due queue URL; a class spread over several queues: their URLs by index.
    queue_urls: dict[str, str | list[str]] | None = None
    # The classes spread over more than one due queue by shard ({"default": 4}; JobClassDef.queues).
    class_queues: dict[str, int] | None = None
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
    # A worker's job class and the modules of its Python handlers (comma-separated), imported at cold start.
    job_class: str = DEFAULT_JOB_CLASS
    handler_modules: str = ""
    # Per-owner quotas (0: unlimited); unset: the DEFAULT_* of definitions.py on AWS, none locally.
    max_active_jobs: int | None = Field(default=None, ge=0)
    job_creates_per_minute: int | None = Field(default=None, ge=0)
    run_nows_per_minute: int | None = Field(default=None, ge=0)
    backfill_slots_per_hour: int | None = Field(default=None, ge=0)
    # Webhook secrets as files in this folder (`duetime local`, `duetime worker --data-dir`); else Secrets Manager.
    webhook_secrets_dir: str | None = None
    # The deployment's smoke target function (context smokeTarget): owners whose id starts SMOKE_OWNER_PREFIX
    # (`duetime smoke`'s) may also use `lambda:<it>`, whatever the grants say.
    smoke_target: str | None = None
    # Events (docs/events.md): the EventBridge bus to publish to (AWS); else, locally, on the console
    # (`events_console`) and POSTed to `events_webhook`; neither: no events, no call.
    event_bus_name: str | None = None
    events_console: bool = False
    events_webhook: str | None = None
    # The owners named in the lateness metrics' `Owner` dimension (definitions.METRIC_RUNS_LATE); the rest
    # count as "other" (CDK context metricOwners).
    metric_owners: list[str] | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Construction takes only its arguments: `duetime local` and tests build configurations that the
        environment of the process must not change. from_env is the one reader of the environment."""
        return (init_settings,)

    @model_validator(mode="after")
    def _preload_schedule(self) -> RuntimeConfig:
        """Refused at cold start: a window the pre-load interval cannot serve would start jobs late."""
        problem = preload_window_problem(self.preload_interval_seconds, self.preload_window_seconds)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _metric_owners(self) -> RuntimeConfig:
        """Refused at cold start: more owners than the metrics' bound, or the name of the rest."""
        problem = metric_owners_problem(self.metric_owners or [])
        if problem:
            raise ValueError(f"{self.env_name('metric_owners')}: {problem}")
        return self

    @model_validator(mode="after")
    def _class_queues(self) -> RuntimeConfig:
        """Refused at cold start: a count out of range, or queue URLs that do not match it (a message
        would be sent to a queue no worker reads)."""
        counts = self.class_queues or {}
        for name, count in counts.items():
            problem = class_queues_problem(name, count, JOB_CLASSES)
            if problem:
                raise ValueError(f"{self.env_name('class_queues')}: {problem}")
        for name, urls in (self.queue_urls or {}).items():
            given = 1 if isinstance(urls, str) else len(urls)
            if given != counts.get(name, 1):
                raise ValueError(
                    f"{self.env_name('queue_urls')} gives {given} queue(s) of class {name!r}, "
                    f"{self.env_name('class_queues')} {counts.get(name, 1)}"
                )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RuntimeConfig:
        """The configuration in the DUETIME_* variables of `environ` (the process environment by default)."""
        return cls(**_Environment(cls, os.environ if environ is None else environ)())

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable of a field: DUETIME_<FIELD>."""
        if field not in cls.model_fields:
            raise KeyError(f"RuntimeConfig has no field {field!r}")
        return f"{ENV_PREFIX}{field.upper()}"

    def to_env(self) -> dict[str, str]:
        """The variables from_env reads back into this configuration: every field given at construction
        (unless None), as text or compact JSON. CDK tokens in string values pass through as they are."""
        env: dict[str, str] = {}
        for field, value in self.model_dump(exclude_unset=True, exclude_none=True).items():
            env[self.env_name(field)] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return env

    @classmethod
    def of_settings(cls, settings: Settings, **given: Any) -> RuntimeConfig:
        """The configuration that carries `settings` (what settings() gives back, less the job classes'
        own leases), with the other fields `given`."""
        spread: dict[str, Any] = {}
        if settings.class_queues():  # only then: a stack with one queue per class keeps its environment
            spread["class_queues"] = settings.class_queues()
        if settings.metric_owners:  # likewise: a stack naming no owner keeps its environment
            spread["metric_owners"] = list(settings.metric_owners)
        return cls(
            prefix=settings.prefix,
            shards=settings.shards,
            preload_interval_seconds=settings.preload_interval_seconds,
            preload_window_seconds=settings.preload_window_seconds,
            history_retention_days=settings.history_retention_days,
            **spread,
            **given,
        )

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
            metric_owners=tuple(self.metric_owners or ()),
        ).with_class_queues(self.class_queues or {})
        return settings.with_lease_seconds(self.lease_seconds) if self.lease_seconds else settings

    def grants(self) -> Grants:
        """The grant rules configured, or the default: everything locally, the demo handlers on AWS."""
        if self.handler_grants is not None:
            grants = Grants.parse(self.handler_grants, source=self.env_name("handler_grants"))
        else:
            grants = EVERYONE if self.endpoint_url else DEMO_ONLY
        if self.smoke_target:
            smoke = GrantRule(owners=(f"{SMOKE_OWNER_PREFIX}*",), handlers=(f"lambda:{self.smoke_target}",))
            grants = Grants(rules=(*grants.rules, smoke))
        return grants

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
            backfill_slots_per_hour=limit(self.backfill_slots_per_hour, DEFAULT_BACKFILL_SLOTS_PER_HOUR),
        )

    def manifest(self) -> dict[str, frozenset[str]]:
        return {job_class: frozenset(names) for job_class, names in (self.handler_manifest or {}).items()}

    def handler_module_names(self) -> list[str]:
        return [m for m in self.handler_modules.split(",") if m]


def runtime_environment(
    settings: Settings,
    region: str,
    queue_urls: Mapping[str, str | list[str]],
    dlq_urls: Mapping[str, str],
    lease_seconds: int | None = None,
) -> dict[str, str]:
    """The variables shared by every function and the `long` worker, for the CDK stack and the local Lambda
    emulation: the settings and the queues by job class (CDK passes tokens that resolve to their URLs; a class
    spread over several due queues, a list of their URLs by index)."""
    given: dict[str, Any] = {"lease_seconds": lease_seconds} if lease_seconds is not None else {}
    config = RuntimeConfig.of_settings(
        settings, region=region, queue_urls=dict(queue_urls), dlq_urls=dict(dlq_urls), **given
    )
    return {**config.to_env(), "POWERTOOLS_METRICS_NAMESPACE": METRIC_NAMESPACE}


def quota_environment(quotas: Quotas) -> dict[str, str]:
    """The API function's quota variables (0: unlimited), as RuntimeConfig.quotas reads them."""
    return RuntimeConfig(
        max_active_jobs=quotas.max_active_jobs or 0,
        job_creates_per_minute=quotas.job_creates_per_minute or 0,
        run_nows_per_minute=quotas.run_nows_per_minute or 0,
        backfill_slots_per_hour=quotas.backfill_slots_per_hour or 0,
    ).to_env()


def function_environment(
    function: str,
    shared: dict[str, str],
    job_class: str | None = None,
    handler_modules: str = "",
    alert_topic_arn: str | None = None,
) -> dict[str, str]:
    """One function's environment: the shared variables, its Powertools service name, the worker's job
    class and handler modules, the DLQ notifier's alert topic."""
    own: dict[str, Any] = {}
    if job_class is not None:
        own.update(job_class=job_class, handler_modules=handler_modules)
    if alert_topic_arn is not None:
        own.update(alert_topic_arn=alert_topic_arn)
    return {**shared, "POWERTOOLS_SERVICE_NAME": function, **RuntimeConfig(**own).to_env()}


def build_ports(config: RuntimeConfig, notifier: Notifier | None = None) -> Ports:
    """Clients, adapters and the notifier, wired once per process."""
    settings = config.settings()
    dynamodb = make_client("dynamodb", config.region, config.endpoint_url, identity=config.local_identity)
    sqs = make_client("sqs", config.region, config.endpoint_url, identity=config.local_identity)
    if config.queue_urls and config.dlq_urls:
        queues = DueQueues(sqs, config.queue_urls, config.dlq_urls, runs_per_message=packing(settings))
    else:
        queues = DueQueues.resolve(sqs, settings)
    if notifier is None:  # the DLQ notifier (an alert topic) tells each owner where its job says
        notifier = build_owner_notifier(config) if config.alert_topic_arn else ConsoleNotifier()
    return Ports(
        store=DynamoStore(dynamodb, settings),
        queues=queues,
        settings=settings,
        notifier=notifier,
        grants=config.grants(),
        handler_manifest=config.manifest(),
        quotas=config.quotas(),
        events=build_events(config),
        # Where CloudWatch reads stdout, the lateness metrics as EMF (locally: none, the job's health shows them).
        owner_metric=emf_owner_count if _on_aws() else None,
    )


def _on_aws() -> bool:
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ or "ECS_CONTAINER_METADATA_URI_V4" in os.environ


def build_owner_notifier(config: RuntimeConfig, also: Notifier | None = None) -> OwnerNotifier:
    """The notifier that tells each owner at its job's destinations: SNS for topics and mail, webhooks
    signed with the owner's secret (build_webhook_secrets), loopback allowed only locally."""
    webhooks = WebhookTarget(build_webhook_secrets(config), allow_loopback=config.settings().allow_loopback_webhooks)
    sns = make_client("sns", config.region, config.endpoint_url, identity=config.local_identity)
    if also is None and config.endpoint_url and config.alert_topic_arn:
        # `duetime local --backend moto`: every notice is also relayed to its console through the alert
        # topic on moto (local/notices.py), as the local machine shows every owner's notices.
        also = SnsNotifier(sns, config.alert_topic_arn)
    count_metric = emf_count if _on_aws() else None
    return OwnerNotifier(sns, webhooks, config.prefix, also=also, count_metric=count_metric, grants=config.grants())


def build_events(config: RuntimeConfig) -> EventSink | None:
    """Where events go: the configured EventBridge bus, else the console and webhook of `duetime local`
    when asked for, else nowhere (None: no event is built and no call made)."""
    if config.event_bus_name:
        client = make_client("events", config.region, config.endpoint_url, identity=config.local_identity)
        return EventBridgeEvents(client, config.event_bus_name, emf_count if _on_aws() else None)
    if config.events_console or config.events_webhook:
        secrets = build_webhook_secrets(config)
        webhooks = WebhookTarget(secrets, allow_loopback=config.settings().allow_loopback_webhooks)
        return ConsoleEvents(webhook_url=config.events_webhook, webhooks=webhooks, echo=config.events_console)
    return None


def build_webhook_secrets(config: RuntimeConfig) -> WebhookSecrets:
    """Owners' webhook secrets: files under `webhook_secrets_dir` when set, else Secrets Manager."""
    if config.webhook_secrets_dir:
        return FileSecrets(config.webhook_secrets_dir)
    return SecretsManagerSecrets.lazy(
        lambda: make_client("secretsmanager", config.region, config.endpoint_url, identity=config.local_identity),
        config.prefix,
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
        ecs = EcsTarget(
            make_client("ecs", config.region, config.endpoint_url, identity=config.local_identity), settings
        )
    lambda_target = LambdaTarget(
        make_client("lambda", config.region, config.endpoint_url, LAMBDA_INVOKE_CONFIG, config.local_identity)
    )
    webhook = WebhookTarget(build_webhook_secrets(config), allow_loopback=config.settings().allow_loopback_webhooks)
    return Targets(lambda_target=lambda_target, ecs_target=ecs, webhook_target=webhook)
