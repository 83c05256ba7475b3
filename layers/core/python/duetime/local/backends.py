"""The store and due queues under `duetime local`: one SQLite file (the default) or an embedded moto server.

`start_backend` is what `duetime local` runs on; `attach_ports` is how another process (`duetime worker
--data-dir`, `duetime audit`) reaches the same data from the local.json it left in its data dir.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.secrets import FileSecrets
from duetime.adapters.sqlite.db import DATABASE_FILE, Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.adapters.sqlite.store import SqliteStore
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import JOB_CLASSES, LOCAL_SETTINGS, SQLITE_LOCAL_SETTINGS, TABLES, Settings
from duetime.domain.grants import EVERYONE, Grants
from duetime.event_sinks import ConsoleEvents
from duetime.local import BACKENDS
from duetime.local.state import LocalState
from duetime.notify import ConsoleNotifier
from duetime.service.context import Notifier, Ports
from duetime.targets.webhook import WebhookTarget

if TYPE_CHECKING:  # moto is imported only by the moto backend: SQLite needs none of it
    from duetime.local.moto_server import EmbeddedMoto, MotoProcess
    from duetime.local.template_stack import LocalStack

SQLITE, MOTO = BACKENDS
DEFAULT_BACKEND = BACKENDS[0]
# Worker slots per job class when `duetime local --workers` is not given. On SQLite the slots set how many
# runs a receive, a claim transaction and an end's transaction take together: a write transaction's fixed cost
# (the lock file, BEGIN, the commit, the threads' hand-offs) is shared by the runs in it. 4 slots ran ~400
# trivial jobs/s at most on 2 cores, 8 took 500/s; a burst of 10,000 due together drained in 5.0-5.2 s with 8,
# 3.55 with 32, 3.26 with 64 and 3.06 with 128 (docs/performance.md, 2026-12-03). 64 is also as many idle
# handler threads as a worker keeps (worker/runners.py). moto serves ~26 executions/s: more slots would only
# queue on it.
DEFAULT_WORKERS = {SQLITE: 64, MOTO: 4}
# How often expired history (expiresAt, DynamoDB's TTL attribute) is swept out of the SQLite file; reads
# skip expired rows already, so this only bounds the file's growth.
SWEEP_SECONDS = 300
# What the moto backend creates from the synthesized template: what duetime runs on. Not the roles and policies
# (the moto server checks calls against them itself, duetime.local.iam: moto's IAM is never asked), the event bus
# (events go to the console or a webhook locally) nor the KMS keys (nothing locally encrypts: a key is named by
# its stand-in ARN, and moto's KMS would add a third of a second to every start).
LOCAL_STACK_TYPES = (
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::Topic",
    "AWS::SNS::Subscription",
    "AWS::SNS::TopicPolicy",
)


def local_settings(
    backend: str, prefix: str, shards: int, lease_seconds: int, class_queues: Mapping[str, int] | None = None
) -> Settings:
    """The settings of a `duetime local` on `backend`: its pre-load cadence (definitions.py says why
    each backend has its own), the shards, lease and queues per class given on the command line, every
    job class."""
    cadence = SQLITE_LOCAL_SETTINGS if backend == SQLITE else LOCAL_SETTINGS
    settings = Settings(
        prefix=prefix,
        shards=shards,
        preload_interval_seconds=cadence.preload_interval_seconds,
        preload_window_seconds=cadence.preload_window_seconds,
        job_classes=dict(JOB_CLASSES),
        allow_loopback_webhooks=cadence.allow_loopback_webhooks,
    ).with_class_queues(class_queues or {})
    return settings.with_lease_seconds(lease_seconds)


@dataclass
class LocalBackend:
    """Ports over a started backend, and what another process needs to attach to it."""

    name: str
    ports: Ports
    database_file: str | None = None  # sqlite
    moto: EmbeddedMoto | MotoProcess | None = None
    config: RuntimeConfig | None = None  # moto: how the AWS adapters (and the emulated functions) reach it
    stack: LocalStack | None = None  # moto: the tables, queues and topic created from the synthesized template
    region: str = "us-east-1"
    closers: list[Callable[[], object]] = field(default_factory=list)
    # What the platform does by itself on AWS and `duetime local` must do on a timer: (name, seconds, fn).
    housekeeping: list[tuple[str, float, Callable[[], object]]] = field(default_factory=list)

    @property
    def endpoint_url(self) -> str | None:
        return self.moto.endpoint_url if self.moto else None

    def stop(self) -> None:
        for close in reversed(self.closers):
            close()


def start_backend(
    name: str,
    data_dir: Path,
    settings: Settings,
    notifier: Notifier | None = None,
    moto_port: int = 0,
    moto_in_process: bool = False,
    grants: list[dict[str, Any]] | None = None,
    stack_template: Mapping[str, Any] | None = None,
) -> LocalBackend:
    """Open (SQLite: create or reopen `data_dir`'s database) or start (moto: a fresh, empty server) the
    backend, with every table and queue the settings define (moto: those of `stack_template`, the template
    `cdk synth` writes, by default synthesized now or kept from an earlier synth of the same sources)."""
    if name == SQLITE:
        database = Database(data_dir / DATABASE_FILE)  # created with its schema, or reopened as it was left
        ports = _sqlite_ports(database, settings, notifier, grants)
        store = ports.store
        assert isinstance(store, SqliteStore)
        return LocalBackend(
            SQLITE,
            ports,
            database_file=DATABASE_FILE,
            closers=[database.close],
            housekeeping=[("ttl-sweeper", SWEEP_SECONDS, store.sweep_expired)],
        )
    if name == MOTO:
        return _start_moto(settings, notifier, moto_port, moto_in_process, grants, stack_template)
    raise ValueError(f"unknown backend {name!r}: one of {', '.join(BACKENDS)}")


def _start_moto(
    settings: Settings,
    notifier: Notifier | None,
    port: int,
    in_process: bool,
    grants: list[dict[str, Any]] | None,
    stack_template: Mapping[str, Any] | None,
) -> LocalBackend:
    from duetime.local.moto_server import EmbeddedMoto, MotoProcess
    from duetime.local.synth import template

    stack_template = stack_template if stack_template is not None else template()
    # moto in a process of its own by default: its CPU work then runs beside duetime's on another core.
    moto = EmbeddedMoto(port).start() if in_process else MotoProcess(port).start()
    try:
        config = _moto_config(moto.endpoint_url, settings, grants)
        stack = create_local_stack(stack_template, settings, config)
    except BaseException:
        moto.stop()
        raise
    ports = build_ports(config, notifier)
    return LocalBackend(MOTO, ports, moto=moto, config=config, stack=stack, region=config.region, closers=[moto.stop])


def create_local_stack(stack_template: Mapping[str, Any], settings: Settings, config: RuntimeConfig) -> LocalStack:
    """The tables, queues (with their redrive and queue policies) and alert topic of the synthesized template,
    created on the moto endpoint of `config` as `cdk deploy` creates them, under the settings' prefix and with
    each class spread over the queues `--class-queues` gives it (duetime.local.template_stack.localized).
    A table or queue the settings name that the template does not create stops the start."""
    from duetime.adapters.aws.client import make_client
    from duetime.local.iam_requests import ACCOUNT
    from duetime.local.template_stack import localized, provision_template

    spread = {
        c.queue_name(settings.prefix): c.queue_names(settings.prefix)
        for c in settings.job_classes.values()
        if c.queues > 1
    }
    local = localized(stack_template, settings.prefix, spread)
    stack = provision_template(
        local,
        lambda service: make_client(service, config.region, config.endpoint_url),
        region=config.region,
        account_id=ACCOUNT,
        types=LOCAL_STACK_TYPES,
    )
    made = {r.ref for r in stack.of_type("AWS::DynamoDB::Table").values()}
    made |= {r.attributes["QueueName"] for r in stack.of_type("AWS::SQS::Queue").values()}
    wanted = {settings.table_name(t) for t in TABLES}
    for job_class in settings.job_classes.values():
        wanted |= {*job_class.queue_names(settings.prefix), job_class.dlq_name(settings.prefix)}
    if missing := sorted(wanted - made):
        raise ValueError(f"the synthesized template does not create {', '.join(missing)}")
    return stack


def _moto_config(endpoint_url: str, settings: Settings, grants: list[dict[str, Any]] | None) -> RuntimeConfig:
    lease = max(c.lease_seconds for c in settings.job_classes.values())
    return RuntimeConfig.of_settings(settings, endpoint_url=endpoint_url, lease_seconds=lease, handler_grants=grants)


def config_from_state(state: LocalState) -> RuntimeConfig:
    """The AWS runtime configuration of a moto-backed `duetime local`, from its local.json."""
    return RuntimeConfig(
        prefix=state.prefix,
        region=state.region,
        endpoint_url=state.endpoint_url,
        shards=state.shards,
        preload_interval_seconds=state.preload_interval_seconds,
        preload_window_seconds=state.preload_window_seconds,
        lease_seconds=state.lease_seconds,
        jwt_secret=state.jwt_secret,
        jwt_audience=state.instance_id,
        handler_grants=state.handler_grants,
        class_queues=state.class_queues or None,
    )


def local_events(data_dir: str | Path, console: bool, webhook: str | None) -> ConsoleEvents | None:
    """`duetime local`'s events: printed (`console`) and POSTed to `webhook`, signed with the data dir's
    LOCAL_EVENTS_SIGNER secret; None when neither is asked for."""
    if not console and not webhook:
        return None
    webhooks = WebhookTarget(FileSecrets(data_dir), allow_loopback=True)
    return ConsoleEvents(webhook_url=webhook, webhooks=webhooks, echo=console)


def attach_ports(data_dir: str | Path, state: LocalState, notifier: Notifier | None = None) -> Ports:
    """Ports of this process on the data of the `duetime local` that wrote `state` into `data_dir`."""
    ports = _attach_ports(data_dir, state, notifier)
    if ports.events is None:
        ports.events = local_events(data_dir, state.events_console, state.events_webhook)
    return ports


def _attach_ports(data_dir: str | Path, state: LocalState, notifier: Notifier | None = None) -> Ports:
    if state.backend == SQLITE:
        path = Path(data_dir) / (state.database_file or DATABASE_FILE)
        if not path.exists():  # opening would create an empty one
            raise FileNotFoundError(f"{path} not found: is `duetime local --data-dir {data_dir}` running?")
        settings = Settings(
            prefix=state.prefix,
            shards=state.shards,
            preload_interval_seconds=state.preload_interval_seconds,
            preload_window_seconds=state.preload_window_seconds,
            job_classes=dict(JOB_CLASSES),
            allow_loopback_webhooks=True,  # a local system: its webhooks may call this machine
        ).with_class_queues(state.class_queues)
        settings = settings.with_lease_seconds(state.lease_seconds)
        return _sqlite_ports(Database(path), settings, notifier, state.handler_grants)
    if state.backend == MOTO:
        return build_ports(config_from_state(state), notifier)
    raise ValueError(f"{data_dir}: unknown backend {state.backend!r} in local.json")


def _sqlite_ports(
    database: Database, settings: Settings, notifier: Notifier | None, grants: list[dict[str, Any]] | None
) -> Ports:
    store, queues = SqliteStore(database, settings), SqliteQueues(database, settings)
    # Grants from `--grants`; without, everyone may use everything (the local default).
    rules = EVERYONE if grants is None else Grants.parse(grants, source="--grants")
    return Ports(store=store, queues=queues, settings=settings, notifier=notifier or ConsoleNotifier(), grants=rules)
