"""`duetime local`: the whole system on one machine, over SQLite (the default) or an embedded moto server.

On SQLite the use-cases run directly: the API behind the HTTP bridge, the pre-loader, DLQ drain and TTL
sweeper on timers, worker threads woken at the due instant. Backend "moto" is the AWS-faithful mode: the
real Lambda handlers under functions/ run in the emulation of duetime.local.lambda_mode (API, pre-loader,
DLQ notifier, the `default` class's worker fed by its SQS event source), and the `long` class runs
`duetime worker` loops as ECS does. With `--handlers`, the functions get what a deploy with the same handlers
gives the deployed ones (duetime.local.handler_layer): the workers the handler folder staged as their handler
layer, from which they import the modules at their cold start (duetime.local.lambda_mode says how it stands
in for Lambda's path), and the API the manifest of what the modules register, made as the synth makes it.
The direct wiring stays for `faithful=False` on moto: the benchmarks
count the AWS calls of the system's own clients, which only that wiring uses.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duetime.adapters.aws.client import make_client
from duetime.adapters.aws.queue import DueQueues
from duetime.adapters.aws.secrets import FileSecrets
from duetime.adapters.sqlite.db import DATABASE_FILE, private_directory
from duetime.api.app import build_app, one_at_a_time
from duetime.api.auth import DEFAULT_TOKEN_TTL, issue_token
from duetime.config import RuntimeConfig, build_ports, function_environment, quota_environment, runtime_environment
from duetime.definitions import (
    API_FUNCTION_TIMEOUT_SECONDS,
    DLQ_NOTIFIER_TIMEOUT_SECONDS,
    FUNCTION_MEMORY_MB,
    LOCAL_FIRST_USER,
    WORKER_BATCH_SIZE,
    Settings,
    lambda_worker_timeout_seconds,
)
from duetime.domain.errors import InvalidInput
from duetime.domain.grants import EVERYONE, Grants
from duetime.domain.quotas import UNLIMITED, Quotas
from duetime.local import BACKENDS
from duetime.local.api_process import ApiProcess
from duetime.local.backends import (
    DEFAULT_BACKEND,
    MOTO,
    SQLITE,
    LocalBackend,
    local_events,
    local_settings,
    start_backend,
)
from duetime.local.handler_layer import handler_manifest, stage_handler_layer
from duetime.local.http_bridge import ApiServer
from duetime.local.lambda_mode import LambdaFunction, Schedule, SqsEventSource, layer_imports
from duetime.local.lambda_process import ProcessFunction
from duetime.local.notices import AlertRelay, subscribe_alert_queue
from duetime.local.state import STATE_FILE, LocalState, previous_state
from duetime.local.worker_process import WorkerProcess
from duetime.notify import ConsoleNotifier, OwnerNotifier
from duetime.service.context import Notifier, Ports
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.targets.webhook import WebhookTarget
from duetime.worker.kinds import Targets
from duetime.worker.packaging import api_handler_environment
from duetime.worker.registry import load_modules
from duetime.worker.runtime import Worker

if TYPE_CHECKING:  # moto is imported only by the moto backend: SQLite needs none of it
    from duetime.local.moto_server import EmbeddedMoto, MotoProcess

log = logging.getLogger("duetime.local")
FIRST_USER = LOCAL_FIRST_USER
# Locally the DLQ notifier runs every few seconds instead of every minute, so an owner hears of a failure
# while still looking.
DLQ_NOTIFIER_SECONDS = 2
# Where the AWS-faithful mode stages the handler folder as the workers' handler layer (under the data dir).
HANDLER_LAYER_DIR = Path("lambda") / "handlers"
# A function's variables from the template that name what the local stack does not make, or that the local
# system sets only when asked (a manifest: `--handlers`); events go to the console or a webhook locally.
NOT_MADE_LOCALLY = {
    "DUETIME_EVENT_BUS_NAME",
    "DUETIME_ECS_CLUSTER",
    "DUETIME_ECS_SUBNETS",
    "DUETIME_ECS_SECURITY_GROUPS",
    "DUETIME_HANDLER_MANIFEST",
}


class Every:
    """Calls `fn` every `seconds` in a daemon thread until stopped; a failing call is logged, not fatal."""

    def __init__(self, name: str, seconds: float, fn: Callable[[], object]) -> None:
        self.seconds, self.fn = seconds, fn
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                self.fn()
            except Exception:
                log.exception("%s failed", self.thread.name)
            self.stopped.wait(self.seconds)

    def start(self) -> Every:
        self.thread.start()
        return self


def reset_data(data_dir: Path) -> None:
    """Forget what `duetime local` kept in `data_dir`: the SQLite database (with its journal files) and
    local.json (so the next start makes a new signing key and instance id). Webhook secrets stay."""
    for name in (DATABASE_FILE, f"{DATABASE_FILE}-wal", f"{DATABASE_FILE}-shm", STATE_FILE):
        (data_dir / name).unlink(missing_ok=True)


class LocalSystem:
    """The backend (a SQLite file; or moto, with the tables, queues and topic of the synthesized template), the
    API on HTTP, the pre-loader and DLQ notifier on their schedules, and the workers of each job class."""

    def __init__(
        self,
        data_dir: str | Path = ".duetime",
        port: int = 8080,
        workers: int = 4,
        lease_seconds: int = 30,
        moto_port: int = 0,
        shards: int = 8,
        notifier: Notifier | None = None,
        prefix: str = "duetime",
        moto_in_process: bool = False,
        handler_modules: Sequence[str] = (),
        handler_path: str | Path | None = None,
        grants: list[dict[str, Any]] | None = None,
        backend: str = DEFAULT_BACKEND,
        faithful: bool = True,
        reset: bool = False,
        quotas: Quotas = UNLIMITED,
        worker_process: bool = False,
        worker_processes: int = 1,
        events_console: bool = False,
        events_webhook: str | None = None,
        api_processes: int = 1,
        class_queues: Mapping[str, int] | None = None,
        stack_template: Mapping[str, Any] | None = None,
        function_processes: bool = False,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if worker_process and backend != SQLITE:
            raise ValueError("worker_process needs the sqlite backend")
        if worker_processes < 1:
            raise ValueError("worker_processes is at least 1")
        if api_processes < 1 or (api_processes > 1 and backend != SQLITE):
            raise ValueError("api_processes is 1, or more on the sqlite backend")
        # `backend` is its name and `local_backend` the started one; `faithful` (moto only) runs the real
        # Lambda handlers, else the use-cases directly (the benchmarks count the system's own AWS calls).
        self.backend, self.faithful = backend, faithful and backend == MOTO
        self.local_backend: LocalBackend | None = None
        self.data_dir = Path(data_dir)
        self.port, self.workers, self.lease_seconds = port, workers, lease_seconds
        self.moto_port, self.shards = moto_port, shards
        # Each failure is told on the console (or to the given notifier) and at its job's own destinations
        # (webhooks: signed with the data dir's secrets; SNS topics and mail only on the moto backend).
        webhooks = WebhookTarget(FileSecrets(self.data_dir), allow_loopback=True)
        # Only to destinations the owner is granted (`--grants`; without, everyone may use everything).
        rules = EVERYONE if grants is None else Grants.parse(grants, source="--grants")
        self.notifier: Notifier = OwnerNotifier(
            None, webhooks, prefix, also=notifier or ConsoleNotifier(), grants=rules
        )
        # Events (docs/events.md): printed with `--events`, POSTed to `--events-webhook`; none by default.
        self.events_console, self.events_webhook = events_console, events_webhook
        self.prefix = prefix  # moto servers in one process share their backends: a prefix keeps them apart
        # moto in a process of its own by default: its CPU work then runs beside duetime's on another core.
        self.moto_in_process = moto_in_process
        self.api: ApiServer | None = None
        self.ports: Ports | None = None
        self.timers: list[Every | Schedule] = []
        self.worker_threads: list[tuple[Worker, threading.Thread]] = []
        # SQLite: the workers in child processes of their own (local/worker_process.py says why), as
        # `duetime local` runs them; in this process's threads otherwise (tests that register handlers here).
        self.worker_children: list[WorkerProcess] = []
        self.use_worker_process, self.worker_processes = worker_process, worker_processes
        self.event_sources: list[SqsEventSource] = []
        self.functions: dict[str, LambdaFunction | ProcessFunction] = {}
        self.role_keys: dict[str, str] = {}  # moto, faithful: each function's (and task role's) access key
        # moto, faithful: the synthesized template whose roles are enforced (None: `cdk synth` of the checkout,
        # duetime.local.synth); tests give one with a grant taken out.
        self.stack_template = stack_template
        # moto, faithful: the functions run from the cloud assembly, each instance a process with Lambda's path
        # (duetime.local.lambda_process; `duetime local --backend moto`), else imported in this process.
        self.function_processes = function_processes
        self._assembly: Path | None = None  # moto: the cloud assembly (cdk.out) the functions run from
        self.relay: AlertRelay | None = None
        self.secret = ""
        self.instance_id = ""
        self.reset = reset  # `--reset`: start on empty data, with a new signing key and instance id
        self.quotas = quotas  # each owner's limits (`--max-active-jobs`...): none unless asked for
        # Modules whose @handlers the worker threads serve (`--handlers`), and the grant rules in their
        # JSON form (`--grants FILE`; None: everyone may use everything).
        self.handler_modules = list(handler_modules)
        # The folder that holds their packages (context handlerPath; the current directory by default), and
        # on moto what a deploy makes of it: the API's manifest and the workers' handler layer.
        self.handler_path = Path(handler_path) if handler_path is not None else None
        self.handler_api_environment: dict[str, str] = {}
        self.handler_layer: Path | None = None
        self.grants = grants
        # SQLite: processes answering the API, this one included (local/api_process.py says why).
        self.api_processes = api_processes
        # `--class-queues`: job classes spread over more than one due queue by shard.
        self.class_queues = dict(class_queues or {})
        self.api_children: list[ApiProcess] = []

    def start(self) -> LocalSystem:
        private_directory(self.data_dir)  # 0700 when made here: it holds the database and the secrets
        # A module that does not import fails before anything starts (on moto, as it fails the synth).
        if self.faithful and self.handler_modules:
            self._deploy_handlers()
        else:
            load_modules(self.handler_modules)
        # A restart on the same data dir keeps the secret (tokens stay valid) and the pre-loader's owner:
        # on SQLite its shard leases outlive a killed process, and the same owner resumes them at once.
        # A reset forgets the data and the key: every token issued before it is refused.
        if self.reset:
            reset_data(self.data_dir)
        before = previous_state(self.data_dir)
        self.secret = before.jwt_secret if before else secrets.token_urlsafe(32)
        self.instance_id = (before.instance_id if before else None) or f"duetime-local-{secrets.token_hex(8)}"
        resumed = before.preloader_id if before and before.backend == self.backend else None
        preloader_id = resumed or f"local-preloader-{secrets.token_hex(3)}"
        settings = local_settings(self.backend, self.prefix, self.shards, self.lease_seconds, self.class_queues)
        self.local_backend = backend = start_backend(
            self.backend,
            self.data_dir,
            settings,
            self.notifier,
            self.moto_port,
            self.moto_in_process,
            self.grants,
            stack_template=self._synthesized_template() if self.backend == MOTO else None,
        )
        self.ports = ports = backend.ports
        ports.quotas = self.quotas
        ports.events = local_events(self.data_dir, self.events_console, self.events_webhook)
        if self.faithful:
            assert backend.config is not None
            self._start_functions(backend.config, settings, ports)
        else:
            self._start_direct(settings, ports, preloader_id)
        self.timers += [Every(name, seconds, fn).start() for name, seconds, fn in backend.housekeeping]
        self._write_state(preloader_id)
        if self.api_processes > 1:  # started here, waited for below: they start beside the worker process
            assert self.api is not None
            listener = self.api.shared_listener()
            for _ in range(self.api_processes - 1):
                self.api_children.append(ApiProcess(self.data_dir, listener, self.quotas).start())
        # Webhooks signed with secrets under the data dir, which `duetime webhook-secret` prints.
        if self.use_worker_process and self.workers > 0:
            for _ in range(self.worker_processes):
                self.worker_children.append(WorkerProcess(self.data_dir, self.workers, self.handler_modules).launch())
            for worker_child in self.worker_children:
                worker_child.wait_ready()
            for child in self.api_children:
                child.wait_ready()
            return self
        webhooks = WebhookTarget(FileSecrets(self.data_dir), allow_loopback=settings.allow_loopback_webhooks)
        for job_class in settings.job_classes.values():
            if self.workers > 0 and not (self.faithful and job_class.worker_kind == "lambda"):
                worker = Worker(
                    self._task_ports(job_class.name, ports),
                    job_class.name,
                    f"local-{job_class.name}-{secrets.token_hex(2)}",
                    self.workers,
                    targets=Targets(webhook_target=webhooks),
                )
                thread = threading.Thread(target=worker.run, name=f"worker-{job_class.name}", daemon=True)
                thread.start()
                self.worker_threads.append((worker, thread))
        for child in self.api_children:
            child.wait_ready()
        return self

    def _deploy_handlers(self) -> None:
        """What the synth makes of the handler folder: the folder staged as the workers' handler layer, and
        the API's manifest of what the modules register, imported from it in a process of its own as a
        worker's cold start imports them (never here); a module that would not import there, or a manifest
        and grants too large for Lambda's environment, stop the start as they fail the synth."""
        folder = (self.handler_path or Path.cwd()).resolve()
        staged = self.data_dir / HANDLER_LAYER_DIR
        self.handler_layer = stage_handler_layer(folder, staged, also_skip=[self.data_dir])
        try:
            manifest = handler_manifest(self.handler_modules, self.handler_layer)
            self.handler_api_environment = api_handler_environment(manifest, self.grants)
        except ValueError as exc:
            raise InvalidInput(str(exc), field="handlers") from exc

    def _start_direct(self, settings: Settings, ports: Ports, preloader_id: str) -> None:
        """The use-cases called directly: the API app behind the bridge, pre-load and DLQ drain on timers."""
        app = build_app(ports, local_secret=self.secret, local_audience=self.instance_id)
        self.api = ApiServer(one_at_a_time(app), port=self.port).start()
        self.timers = [
            Every("preloader", settings.preload_interval_seconds, lambda: preload(ports, preloader_id)).start(),
            Every(
                "dlq-notifier",
                DLQ_NOTIFIER_SECONDS,
                lambda: [drain_dead_letters(ports, c) for c in settings.job_classes],
            ).start(),
        ]

    def _start_functions(self, config: RuntimeConfig, settings: Settings, ports: Ports) -> None:
        """The real handlers of functions/ in the Lambda emulation, each with the environment CDK gives it."""
        queues = ports.queues
        assert isinstance(queues, DueQueues)  # the emulation feeds the real functions from SQS on moto
        sns = make_client("sns", config.region, config.endpoint_url)
        topic_arn = self._alert_topic_arn()
        alert_queue_url = subscribe_alert_queue(sns, queues.client, topic_arn, self.prefix)
        self.relay = AlertRelay(queues.client, alert_queue_url, self.notifier).start()
        shared = runtime_environment(
            settings,
            region=config.region,
            queue_urls=queues.runtime_queue_urls(),
            dlq_urls=queues.dlq_urls,
            lease_seconds=self.lease_seconds,
        )
        # What only the local machine needs: moto's endpoint and no X-Ray daemon (and the API a token secret).
        shared.update(POWERTOOLS_TRACE_DISABLED="true")
        # The handlers and grants of `--handlers` / `--grants`, and webhook secrets under the data dir, as the
        # stack gives them to the deployed functions.
        local: dict[str, Any] = {"endpoint_url": config.endpoint_url, "webhook_secrets_dir": str(self.data_dir)}
        if self.events_console or self.events_webhook:
            local.update(events_console=self.events_console, events_webhook=self.events_webhook)
        if self.grants is not None:
            local["handler_grants"] = self.grants
        shared.update(RuntimeConfig(**local).to_env())

        # Every call a function makes carries its role's identity, checked against that role's policies as the
        # synthesized template gives them (duetime.local.iam).
        self.role_keys = self._enforce_roles(config)

        def function(
            name: str, timeout: int, own: dict[str, str] | None = None, instances: int = 0, **extra: str
        ) -> Any:
            suffix = f"-{extra['job_class']}" if "job_class" in extra else ""
            role = f"worker:{extra['job_class']}" if "job_class" in extra else name
            identity = RuntimeConfig(local_identity=self.role_keys[role]).to_env()
            environment = {**function_environment(name, shared, **extra), **identity, **(own or {})}
            function_name = f"{self.prefix}-{name.replace('_', '-')}{suffix}"
            # A worker importing a handler layer stays in this process: its requirements come from this
            # environment (duetime.local.lambda_mode), not installed into the staged layer.
            in_process = not self.function_processes or (name == "worker" and self.handler_layer is not None)
            lambda_function: LambdaFunction | ProcessFunction = (
                LambdaFunction(
                    name=name,
                    function_name=function_name,
                    environment=environment,
                    timeout_seconds=timeout,
                    memory_mb=FUNCTION_MEMORY_MB[name],
                    region=config.region,
                    # Instances in one process share Powertools' resolver state (duetime.api.app.one_at_a_time):
                    # the API's answer one request at a time here, each in its own process otherwise.
                    max_instances=1 if name == "api" else instances or LambdaFunction.max_instances,
                )
                if in_process
                else self._process_function(role, name, function_name, environment, timeout, config.region, instances)
            )
            self.functions[lambda_function.function_name] = lambda_function
            return lambda_function

        # On AWS, Cognito's authorizer checks tokens.
        api_own = RuntimeConfig(jwt_secret=self.secret, jwt_audience=self.instance_id).to_env()
        api_own.update(quota_environment(self.quotas))
        api_own.update(self.handler_api_environment)  # DUETIME_HANDLER_MANIFEST, as the stack sets it
        api = function("api", API_FUNCTION_TIMEOUT_SECONDS, api_own)
        self.api = ApiServer(lambda event, context: dict(api.invoke(event)), port=self.port).start()
        preloader = function("preloader", settings.preload_interval_seconds)
        notifier = function("dlq_notifier", DLQ_NOTIFIER_TIMEOUT_SECONDS, alert_topic_arn=topic_arn)
        self.timers = [
            Schedule(preloader, settings.preload_interval_seconds, f"{self.prefix}-preload").start(),
            Schedule(notifier, DLQ_NOTIFIER_SECONDS, f"{self.prefix}-drain-dead-letters").start(),
        ]
        if self.workers <= 0:
            return
        layers = (self.handler_layer,) if self.handler_layer else ()
        if layers:
            self._import_for_ecs_workers(layers)
        identity_var = RuntimeConfig.env_name("local_identity")
        for job_class in settings.job_classes.values():
            if job_class.worker_kind != "lambda":
                continue
            queue_urls = queues.class_queue_urls[job_class.name]
            # As many instances as its event sources invoke batches at once (`--workers` each): a batch
            # received for an invocation that cannot start would wait, hidden, while its runs come due.
            worker = function(
                "worker",
                lambda_worker_timeout_seconds(job_class),
                instances=self.workers * len(queue_urls),
                job_class=job_class.name,
                handler_modules=",".join(self.handler_modules),
            )
            if isinstance(worker, LambdaFunction):
                worker.layers = layers  # the handler layer: on the worker functions only, as the stack gives it
            # An event source per due queue of the class (on AWS each has a function of its own), polling as
            # Lambda's pollers do: with the function's role.
            poller = make_client("sqs", config.region, config.endpoint_url, identity=worker.environment[identity_var])
            for index, queue_url in enumerate(queue_urls):
                source = SqsEventSource(
                    poller,
                    queue_url,
                    worker.invoke,
                    batch_size=WORKER_BATCH_SIZE,
                    concurrency=self.workers,
                    region=config.region,
                    name=f"worker-{job_class.name}" + (f"-{index}" if index else ""),
                )
                self.event_sources.append(source.start())

    def _task_ports(self, job_class: str, ports: Ports) -> Ports:
        """The ports of a class's `duetime worker` loops: on moto (faithful), calling as the class's ECS task
        role, whose policies the moto server checks; else this process's own."""
        key = self.role_keys.get(f"task:{job_class}")
        if not self.faithful or key is None or self.local_backend is None or self.local_backend.config is None:
            return ports
        # The queue URLs as the task's environment gives them (it resolves none: no sqs:GetQueueUrl).
        update: dict[str, Any] = {"local_identity": key}
        if isinstance(ports.queues, DueQueues):
            update.update(queue_urls=ports.queues.runtime_queue_urls(), dlq_urls=ports.queues.dlq_urls)
        config = self.local_backend.config.model_copy(update=update)
        task_ports = build_ports(config, self.notifier)
        task_ports.quotas, task_ports.events = ports.quotas, ports.events
        return task_ports

    def _synthesized_template(self) -> dict[str, Any]:
        """The template the moto backend's stack is created from and its roles enforced by: the synthesized
        stack's (synthesized now, or kept from an earlier synth of the same sources), or the one a test gives."""
        from duetime.local.synth import TEMPLATE_FILE, synthesized

        self._assembly = synthesized()
        if self.stack_template is not None:
            return dict(self.stack_template)
        return dict(json.loads((self._assembly / TEMPLATE_FILE).read_text()))

    def _alert_topic_arn(self) -> str:
        """The topic the template gives the DLQ notifier (its alert topic), as the local stack created it."""
        assert self.local_backend is not None and self.local_backend.stack is not None
        stack = self.local_backend.stack
        variable = RuntimeConfig.env_name("alert_topic_arn")
        for resource in stack.template["Resources"].values():
            variables = (resource.get("Properties") or {}).get("Environment", {}).get("Variables", {})
            if resource["Type"] == "AWS::Lambda::Function" and variable in variables:
                return str(stack.resolve(variables[variable]))
        raise ValueError(f"no function of the template has {variable}: no alert topic to relay")

    def _enforce_roles(self, config: RuntimeConfig) -> dict[str, str]:
        """Give the moto server the roles of the local stack's template, resolved to its resources; returns each
        function's access key ("api", "preloader", "dlq_notifier", "worker:<class>", "task:<class>")."""
        from duetime.local.moto_server import enforce_roles
        from duetime.local.stack_roles import function_roles, policy_table, role_key

        assert self.local_backend is not None and self.local_backend.stack is not None
        stack = self.local_backend.stack
        assert config.endpoint_url is not None
        enforce_roles(config.endpoint_url, policy_table(stack))
        return {function: role_key(role) for function, role in function_roles(stack.template).items()}

    def _process_function(
        self,
        role: str,
        name: str,
        function_name: str,
        environment: dict[str, str],
        timeout: int,
        region: str,
        instances: int = 0,
    ) -> ProcessFunction:
        """The function `role` ("api", "worker:default"...) of the cloud assembly, its instances processes with
        Lambda's path; its environment the template's, resolved to the local stack, under this system's own
        (the local cadence, queues, endpoint, identity) and without what names resources the local stack does
        not make (the event bus: events go to the console or webhook; the ECS cluster)."""
        from duetime.local.lambda_process import ProcessFunction, deployed_functions, lambda_path, resolved_environment

        assert self._assembly is not None and self.local_backend is not None and self.local_backend.stack is not None
        stack = self.local_backend.stack
        deployed = {
            f"{f.service}:{f.job_class}" if f.service == "worker" else f.service: f
            for f in deployed_functions(stack.template, self._assembly)
        }[role]
        from_template = {
            key: value for key, value in resolved_environment(deployed, stack).items() if key not in NOT_MADE_LOCALLY
        }
        return ProcessFunction(
            name=name,
            function_name=function_name,
            environment={**from_template, **environment},
            timeout_seconds=timeout,
            memory_mb=FUNCTION_MEMORY_MB[name],
            region=region,
            deployed=deployed,
            lambda_path=lambda_path(deployed),
            max_instances=instances or ProcessFunction.max_instances,
        )

    def _import_for_ecs_workers(self, layers: tuple[Path, ...]) -> None:
        """The handler modules for the `long` class's `duetime worker` loops, which run in this process:
        imported from the staged folder with only duetime's dependencies beside it, as the `long` image
        holds them. One that does not import is logged and those loops serve the built-in handlers only
        (on AWS the image's tasks would fail to start); the Lambda workers fail their cold starts alike."""
        try:
            with layer_imports(layers):
                load_modules(self.handler_modules)
        except InvalidInput:
            log.exception("the handler layer does not import: the ECS-style workers serve the built-in handlers")

    def _write_state(self, preloader_id: str) -> None:
        assert self.local_backend and self.api
        settings = self.local_backend.ports.settings
        LocalState(
            backend=self.local_backend.name,
            api_url=self.api.url,
            endpoint_url=self.local_backend.endpoint_url,
            database_file=self.local_backend.database_file,
            region=self.local_backend.region,
            prefix=settings.prefix,
            shards=settings.shards,
            lease_seconds=self.lease_seconds,
            preload_interval_seconds=settings.preload_interval_seconds,
            preload_window_seconds=settings.preload_window_seconds,
            jwt_secret=self.secret,
            instance_id=self.instance_id,
            preloader_id=preloader_id,
            handler_grants=self.grants,
            pid=os.getpid(),
            events_console=self.events_console,
            events_webhook=self.events_webhook,
            class_queues=settings.class_queues(),
        ).write(self.data_dir)

    def token(
        self,
        owner: str = FIRST_USER,
        worker: bool = False,
        groups: Sequence[str] = (),
        ttl: timedelta = DEFAULT_TOKEN_TTL,
    ) -> str:
        """A token for `owner` this system's API accepts for `ttl` (and no other data dir's does)."""
        return issue_token(self.secret, owner, worker=worker, groups=groups, ttl=ttl, audience=self.instance_id)

    @property
    def moto(self) -> EmbeddedMoto | MotoProcess | None:
        """The embedded moto server of the moto backend (None on SQLite)."""
        return self.local_backend.moto if self.local_backend else None

    @property
    def api_url(self) -> str:
        assert self.api is not None
        return self.api.url

    def stop(self) -> None:
        for child in self.api_children:  # first: they accept on this process's listener, which closes below
            child.stop()
        for worker, _ in self.worker_threads:
            worker.stopping.set()
        for timer in self.timers:
            timer.stopped.set()
        for source in self.event_sources:
            source.stopped.set()
        # Function processes end before their pollers are waited for: a poller inside an invocation (a handler
        # sleeping out its run) returns as its instance ends, where waiting first took 15 s a poller.
        for function in self.functions.values():
            if isinstance(function, ProcessFunction):
                function.stop()
        for source in self.event_sources:
            source.stop()
        for worker_child in self.worker_children:  # all at once: each lets its runs finish within the grace
            worker_child.ask_to_stop()
        for worker_child in self.worker_children:
            worker_child.stop()
        for _, thread in self.worker_threads:
            thread.join(timeout=15)
        if self.relay:
            self.relay.stop()
        if self.api:
            self.api.stop()
        if self.local_backend:
            self.local_backend.stop()
