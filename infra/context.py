"""Deployment settings from CDK context (`cdk deploy -c key=value`), each with its documented default.

Defaults that the local runtime shares (prefix, shards, window, retention, lease) come from
duetime.definitions.Settings, never restated here. Job classes, their queues and leases are
duetime.definitions.JOB_CLASSES: the runtime reads the same table, so they are not context.

| key                    | default                              | meaning                                              |
| ---------------------- | ------------------------------------ | ---------------------------------------------------- |
| prefix                 | Settings.prefix ("duetime")          | name prefix of tables and queues (DUETIME_PREFIX)    |
| shards                 | Settings.shards (32)                 | execution partitions per hour                        |
| leaseSeconds           | each job class's lease (30)          | lease of a claimed attempt; heartbeats every 1/3     |
| preloadWindowSeconds   | Settings.preload_window_seconds (300)| how far ahead the pre-loader sends due executions    |
| preloadShardGroups     | 1                                    | pre-loader invocations per tick, each a shard group  |
| historyRetentionDays   | Settings.history_retention_days (30) | TTL of finished executions                           |
| metricOwners           | "" (none: every owner is `other`)    | owners with own lateness metrics and alarms (a,b)    |
| alarmEmail             | none                                 | email subscribed to the alarm topic                  |
| jwtIssuer              | none: a Cognito user pool's tokens   | an OIDC issuer URL federated into the user pool      |
| jwtAudience            | none                                 | the client id duetime has at `jwtIssuer`             |
| jwtClientSecretName    | none                                 | Secrets Manager secret with that client's secret     |
| callbackUrl            | http://localhost:8080/callback       | OAuth callback of the user pool client (federation)  |
| handlerPath            | none                                 | folder of your handler packages, shipped to workers  |
| handlerModules         | "" (built-in demo handlers only)     | DUETIME_HANDLER_MODULES of the workers (a,b)         |
| handlerGrants          | none (AWS default: demo handlers)    | DUETIME_HANDLER_GRANTS of the API and workers (JSON) |
| handlerFunctions       | "" (none)                            | Lambda functions `lambda:` handlers may invoke (a,b) |
| handlerTaskDefinitions | "" (none)                            | task families `ecs:` handlers may run (a,b)          |
| handlerTaskRoles       | "" (none)                            | roles those tasks run as (names or ARNs; PassRole)   |
| handlerExecutionRoles  | "" (none)                            | their execution roles (names or ARNs; PassRole)      |
| workerRoleArns         | "" (none)                            | more principals admitted to the worker routes (a,b)  |
| workerMaxConcurrency   | 50                                   | most concurrent batches per Lambda worker (reserved) |
| classQueues            | "" (one due queue per class)         | due queues per class by shard (default:4,long:1)     |
| apiReservedConcurrency | 50                                   | concurrency kept for the API function (0: none)      |
| callerRateLimit        | 10 x (creates + run-nows)/min quotas | WAF: requests per 5 minutes per token (owner)        |
| maxActiveJobs          | 10000 (definitions.py)               | jobs (not cancelled) per owner; 0: unlimited         |
| jobCreatesPerMinute    | 600 (definitions.py)                 | job creations per owner and minute; 0: unlimited     |
| runNowsPerMinute       | 120 (definitions.py)                 | run-now requests per owner and minute; 0: unlimited  |
| backfillSlotsPerHour   | 2000 (definitions.py)                | backfilled runs per owner and hour; 0: unlimited     |
| kmsKey                 | none: AWS managed keys               | "create" or a key ARN: tables, queues, topic, logs   |
| logRetentionDays       | 90                                   | retention of every log group                         |
| apiRateLimit           | 1000                                 | API Gateway steady requests per second               |
| apiBurstLimit          | 2000                                 | API Gateway burst                                    |
| longWorkerMinTasks     | 1                                    | ECS tasks of the `long` class when idle              |
| longWorkerMaxTasks     | 10                                   | ECS tasks of the `long` class at most                |
| console                | false                                | deploy the web console (S3, CloudFront, hosted UI)   |
| smokeTarget            | true                                 | deploy `duetime smoke`'s `lambda:` target function  |
| eventBus               | create                               | events to a bus of the stack, "default" or "none"    |
| ownerTopicAccounts     | * (any account)                      | accounts of owners' duetime-notify-* topics (a,b)    |
| billing                | onDemand                             | "provisioned": capacity with auto-scaling (below)    |
| provisionedTargetUtilization | 70                             | percent auto-scaling holds consumption at (20..90)   |
| provisionedMinUnits / provisionedMaxUnits | 5 / 40000         | each table's and index's read and write units       |
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructs import Node
from duetime.definitions import (
    DEFAULT_API_RESERVED_CONCURRENCY,
    DEFAULT_BACKFILL_SLOTS_PER_HOUR,
    DEFAULT_JOB_CREATES_PER_MINUTE,
    DEFAULT_MAX_ACTIVE_JOBS,
    DEFAULT_RUN_NOWS_PER_MINUTE,
    DEFAULT_WORKER_MAX_CONCURRENCY,
    JOB_CLASSES,
    SQS_MAX_DELAY_SECONDS,
    Settings,
    metric_owners_problem,
    parse_class_queues,
    preload_window_problem,
    smoke_target_name,
)
from duetime.domain.quotas import Quotas

from infra.handlers import HandlerCode

# SQS's delay cap less the pre-load interval: what is loaded must still fit a DelaySeconds next minute.
MAX_PRELOAD_WINDOW_SECONDS = SQS_MAX_DELAY_SECONDS - Settings().preload_interval_seconds
DEFAULT_QUOTAS = Quotas(
    DEFAULT_MAX_ACTIVE_JOBS,
    DEFAULT_JOB_CREATES_PER_MINUTE,
    DEFAULT_RUN_NOWS_PER_MINUTE,
    DEFAULT_BACKFILL_SLOTS_PER_HOUR,
)
DEFAULT_CALLBACK_URL = "http://localhost:8080/callback"
# Lambda's SQS event source accepts a maximum concurrency of 2 to 1000; WAF a rate limit from 10 (per 5 minutes).
# (DEFAULT_WORKER_MAX_CONCURRENCY, DEFAULT_API_RESERVED_CONCURRENCY: duetime.definitions, which the capacity
# planner reads too.)
# WAF's limit per token when context callerRateLimit is not given: twice what the owner quotas let a token
# write in WAF's 5-minute window (job creations and run-nows; an unlimited one counted at its default), so the
# reads beside those writes fit too. WAF is a backstop behind the quotas' own 429s, never a lower limit.
TOKEN_RATE_LIMIT_PER_QUOTA_MINUTE = 2 * 5


def default_caller_rate_limit(quotas: Quotas) -> int:
    creates = quotas.job_creates_per_minute or DEFAULT_JOB_CREATES_PER_MINUTE
    run_nows = quotas.run_nows_per_minute or DEFAULT_RUN_NOWS_PER_MINUTE
    return TOKEN_RATE_LIMIT_PER_QUOTA_MINUTE * (creates + run_nows)


DEFAULT_CALLER_RATE_LIMIT = default_caller_rate_limit(DEFAULT_QUOTAS)
CREATE_KMS_KEY = "create"
# Context eventBus: where events go (docs/events.md).
CREATE_EVENT_BUS, DEFAULT_EVENT_BUS, NO_EVENT_BUS = "create", "default", "none"
EVENT_BUS_CHOICES = (CREATE_EVENT_BUS, DEFAULT_EVENT_BUS, NO_EVENT_BUS)
ANY_ACCOUNT = "*"
# Days CloudWatch Logs accepts as a retention, with the name aws_logs.RetentionDays gives each.
LOG_RETENTION_CHOICES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def _int(node: Node, key: str, default: int, minimum: int = 1) -> int:
    raw: Any = node.try_get_context(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"context {key} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"context {key} must be at least {minimum}, got {value}")
    return value


def _str(node: Node, key: str, default: str | None = None) -> str | None:
    raw: Any = node.try_get_context(key)
    return default if raw is None or raw == "" else str(raw)


def _list(node: Node, key: str) -> list[str]:
    return [item.strip() for item in (_str(node, key, "") or "").split(",") if item.strip()]


def _class_queues(node: Node) -> dict[str, int]:
    """Context classQueues (`default:4,long:1`): each class's due queues, 1..MAX_CLASS_QUEUES."""
    raw: Any = node.try_get_context("classQueues")
    if raw is None or raw == "":
        return {}
    try:
        return parse_class_queues(str(raw), ":", JOB_CLASSES)
    except ValueError as exc:
        raise ValueError(f"context classQueues: {exc}") from exc


def _kms_key(node: Node) -> str | None:
    raw = _str(node, "kmsKey")
    if raw is None or raw == CREATE_KMS_KEY or (raw.startswith("arn:") and ":kms:" in raw and ":key/" in raw):
        return raw
    raise ValueError(f'context kmsKey must be "{CREATE_KMS_KEY}" or a KMS key ARN, got {raw!r}')


def _event_bus(node: Node) -> str:
    raw = _str(node, "eventBus", CREATE_EVENT_BUS) or CREATE_EVENT_BUS
    if raw not in EVENT_BUS_CHOICES:
        raise ValueError(f"context eventBus must be one of {', '.join(EVENT_BUS_CHOICES)}, got {raw!r}")
    return raw


def grants_json(raw: Any) -> str | None:
    """Handler grants as compact JSON: given as a JSON string (`-c handlerGrants='...'`) or as JSON in cdk.json."""
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"context handlerGrants must be JSON, got {raw!r}") from exc


@dataclass(frozen=True)
class ProvisionedCapacity:
    """CDK context `billing=provisioned`: every table and index gets provisioned read and write capacity that
    auto-scaling keeps at `target_utilization` percent of what it consumes, between `min_units` and
    `max_units` (context provisionedTargetUtilization, provisionedMinUnits, provisionedMaxUnits). Cheaper than
    on demand for a steady load (duetime capacity --billing provisioned prices it); a burst faster than
    auto-scaling reacts (minutes) is throttled until it does, and the workers retry."""

    target_utilization: int = 70
    min_units: int = 5
    max_units: int = 40_000


def _provisioned(node: Node) -> ProvisionedCapacity | None:
    billing = _str(node, "billing", "onDemand")
    if billing == "onDemand":
        return None
    if billing != "provisioned":
        raise ValueError(f'context billing must be "onDemand" or "provisioned", got {billing!r}')
    base = ProvisionedCapacity()
    target = _int(node, "provisionedTargetUtilization", base.target_utilization, minimum=20)
    if target > 90:
        raise ValueError(f"context provisionedTargetUtilization must be 20..90 (percent), got {target}")
    min_units = _int(node, "provisionedMinUnits", base.min_units)
    return ProvisionedCapacity(target, min_units, max(min_units, _int(node, "provisionedMaxUnits", base.max_units)))


@dataclass(frozen=True)
class DeployContext:
    """Every setting the stack reads, resolved once from CDK context."""

    settings: Settings
    lease_seconds: int | None
    alarm_email: str | None
    jwt_issuer: str | None
    jwt_audience: str | None
    jwt_client_secret_name: str | None
    callback_url: str
    handler_code: HandlerCode
    handler_grants: str | None  # JSON, D's rule format, passed through as DUETIME_HANDLER_GRANTS
    handler_functions: list[str]
    handler_task_definitions: list[str]
    log_retention_days: int
    api_rate_limit: int
    api_burst_limit: int
    long_worker_min_tasks: int
    long_worker_max_tasks: int
    preload_shard_groups: int = 1
    handler_task_roles: list[str] = dataclasses.field(default_factory=list)
    handler_execution_roles: list[str] = dataclasses.field(default_factory=list)
    worker_role_arns: list[str] = dataclasses.field(default_factory=list)
    worker_max_concurrency: int = DEFAULT_WORKER_MAX_CONCURRENCY
    api_reserved_concurrency: int = DEFAULT_API_RESERVED_CONCURRENCY
    caller_rate_limit: int = DEFAULT_CALLER_RATE_LIMIT
    kms_key: str | None = None  # None: AWS managed keys; "create"; or an existing key's ARN
    quotas: Quotas = DEFAULT_QUOTAS
    console: bool = False  # the web console: bucket, distribution and a user pool client (infra.console)
    smoke_target: bool = True  # `duetime smoke`'s `lambda:` target function (infra.smoke_target)
    event_bus: str = CREATE_EVENT_BUS  # "create" a bus of the stack, "default" the account's, "none": no events
    # Accounts whose duetime-notify-* SNS topics the DLQ notifier may publish to (owners' failure destinations).
    owner_topic_accounts: list[str] = dataclasses.field(default_factory=lambda: [ANY_ACCOUNT])
    # The tables' billing: None on demand (the default), else provisioned capacity with auto-scaling.
    provisioned: ProvisionedCapacity | None = None

    @property
    def lambda_targets(self) -> list[str]:
        """The functions `lambda:` handlers may invoke: context handlerFunctions and the smoke target."""
        smoke = [smoke_target_name(self.settings.prefix)] if self.smoke_target else []
        return [*self.handler_functions, *smoke]

    @property
    def handler_modules(self) -> str:
        """DUETIME_HANDLER_MODULES of the workers: the modules of handler_code, comma-separated."""
        return self.handler_code.modules_env

    @classmethod
    def from_node(cls, node: Node) -> DeployContext:
        base = Settings()
        settings = Settings(
            prefix=_str(node, "prefix", base.prefix) or base.prefix,
            shards=_int(node, "shards", base.shards),
            preload_interval_seconds=base.preload_interval_seconds,
            preload_window_seconds=_int(node, "preloadWindowSeconds", base.preload_window_seconds),
            history_retention_days=_int(node, "historyRetentionDays", base.history_retention_days),
            metric_owners=tuple(_list(node, "metricOwners")),
        ).with_class_queues(_class_queues(node))
        owners_problem = metric_owners_problem(settings.metric_owners)
        if owners_problem:
            raise ValueError(f"context {owners_problem}")
        if settings.preload_window_seconds > MAX_PRELOAD_WINDOW_SECONDS:
            raise ValueError(f"context preloadWindowSeconds must be at most {MAX_PRELOAD_WINDOW_SECONDS}")
        problem = preload_window_problem(settings.preload_interval_seconds, settings.preload_window_seconds)
        if problem:
            raise ValueError(f"context {problem}")
        lease = node.try_get_context("leaseSeconds")
        lease_seconds = None if lease in (None, "") else _int(node, "leaseSeconds", 30, minimum=3)
        if lease_seconds is not None:
            settings = settings.with_lease_seconds(lease_seconds)
        retention = _int(node, "logRetentionDays", 90)
        if retention not in LOG_RETENTION_CHOICES:
            raise ValueError(
                f"context logRetentionDays must be one of {sorted(LOG_RETENTION_CHOICES)}, got {retention}"
            )
        issuer = _str(node, "jwtIssuer")
        audience = _str(node, "jwtAudience")
        secret_name = _str(node, "jwtClientSecretName")
        if issuer and not (audience and secret_name):
            raise ValueError("context jwtIssuer needs jwtAudience (the client id) and jwtClientSecretName")
        min_tasks = _int(node, "longWorkerMinTasks", 1, minimum=0)
        quotas = Quotas(
            max_active_jobs=_int(node, "maxActiveJobs", DEFAULT_MAX_ACTIVE_JOBS, minimum=0) or None,
            job_creates_per_minute=_int(node, "jobCreatesPerMinute", DEFAULT_JOB_CREATES_PER_MINUTE, minimum=0) or None,
            run_nows_per_minute=_int(node, "runNowsPerMinute", DEFAULT_RUN_NOWS_PER_MINUTE, minimum=0) or None,
            backfill_slots_per_hour=_int(node, "backfillSlotsPerHour", DEFAULT_BACKFILL_SLOTS_PER_HOUR, minimum=0)
            or None,
        )
        shard_groups = _int(node, "preloadShardGroups", 1)
        if shard_groups > settings.shards:
            raise ValueError(f"context preloadShardGroups must be at most shards ({settings.shards})")
        return cls(
            settings=settings,
            lease_seconds=lease_seconds,
            alarm_email=_str(node, "alarmEmail"),
            jwt_issuer=issuer,
            jwt_audience=audience,
            jwt_client_secret_name=secret_name,
            callback_url=_str(node, "callbackUrl", DEFAULT_CALLBACK_URL) or DEFAULT_CALLBACK_URL,
            handler_code=HandlerCode(
                path=Path(raw_path).resolve() if (raw_path := _str(node, "handlerPath")) else None,
                modules=[m.strip() for m in (_str(node, "handlerModules", "") or "").split(",") if m.strip()],
            ),
            handler_grants=grants_json(node.try_get_context("handlerGrants")),
            handler_functions=[f for f in (_str(node, "handlerFunctions", "") or "").split(",") if f],
            handler_task_definitions=[f for f in (_str(node, "handlerTaskDefinitions", "") or "").split(",") if f],
            log_retention_days=retention,
            api_rate_limit=_int(node, "apiRateLimit", 1000),
            api_burst_limit=_int(node, "apiBurstLimit", 2000),
            long_worker_min_tasks=min_tasks,
            long_worker_max_tasks=max(min_tasks, _int(node, "longWorkerMaxTasks", 10)),
            preload_shard_groups=shard_groups,
            handler_task_roles=_list(node, "handlerTaskRoles"),
            handler_execution_roles=_list(node, "handlerExecutionRoles"),
            worker_role_arns=_list(node, "workerRoleArns"),
            worker_max_concurrency=min(
                1000, _int(node, "workerMaxConcurrency", DEFAULT_WORKER_MAX_CONCURRENCY, minimum=2)
            ),
            api_reserved_concurrency=_int(node, "apiReservedConcurrency", DEFAULT_API_RESERVED_CONCURRENCY, minimum=0),
            caller_rate_limit=_int(node, "callerRateLimit", default_caller_rate_limit(quotas), minimum=10),
            kms_key=_kms_key(node),
            quotas=quotas,
            console=str(node.try_get_context("console") or "").lower() in ("true", "1", "yes"),
            smoke_target=str(node.try_get_context("smokeTarget") or "true").lower() not in ("false", "0", "no"),
            event_bus=_event_bus(node),
            owner_topic_accounts=_list(node, "ownerTopicAccounts") or [ANY_ACCOUNT],
            provisioned=_provisioned(node),
        )
