"""`duetime local`: the whole system on one machine over an embedded moto server.

Backend "moto" is the AWS-faithful mode: the real Lambda handlers under functions/ run in the emulation of
duetime.local.lambda_mode (API, pre-loader, DLQ notifier, the `default` class's worker fed by its SQS event
source), and the `long` class runs `duetime worker` loops as ECS does. The direct wiring (the use-cases on
timers and worker threads, no handlers) stays for `faithful=False`: the benchmarks count the AWS calls of
the system's own clients, which only that wiring uses.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.config import RuntimeConfig, build_ports, function_environment, runtime_environment
from duetime.definitions import (
    API_FUNCTION_TIMEOUT_SECONDS,
    DLQ_NOTIFIER_TIMEOUT_SECONDS,
    FUNCTION_MEMORY_MB,
    LOCAL_SETTINGS,
    WORKER_BATCH_SIZE,
    Settings,
    lambda_worker_timeout_seconds,
)
from duetime.local import BACKENDS
from duetime.local.http_bridge import ApiServer
from duetime.local.lambda_mode import LambdaFunction, Schedule, SqsEventSource
from duetime.local.moto_server import EmbeddedMoto, MotoProcess
from duetime.local.notices import AlertRelay, create_alert_topic
from duetime.local.state import STATE_FILE
from duetime.queue.notify import ConsoleNotifier
from duetime.queue.provision import create_queues
from duetime.queue.sqs import DueQueues
from duetime.queue.webhook import WebhookTarget
from duetime.service.context import Notifier, Ports
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.store.aws import make_client
from duetime.store.provision import create_tables
from duetime.store.secrets import FileSecrets
from duetime.worker.kinds import Targets
from duetime.worker.registry import load_modules
from duetime.worker.runtime import Worker

log = logging.getLogger("duetime.local")
FIRST_USER = "local-user"
# Locally the DLQ notifier runs every few seconds instead of every minute, so an owner hears of a failure
# while still looking.
DLQ_NOTIFIER_SECONDS = 2


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


class LocalSystem:
    """moto, tables and queues from the shared definitions, the API on HTTP, the pre-loader and DLQ
    notifier on their schedules, and the workers of each job class."""

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
        grants: list[dict[str, Any]] | None = None,
        backend: str = "moto",
        faithful: bool = True,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        self.backend, self.faithful = backend, faithful
        self.data_dir = Path(data_dir)
        self.port, self.workers, self.lease_seconds = port, workers, lease_seconds
        self.moto_port, self.shards = moto_port, shards
        self.notifier: Notifier = notifier or ConsoleNotifier()
        self.prefix = prefix  # moto servers in one process share their backends: a prefix keeps them apart
        # moto in a process of its own by default: its CPU work then runs beside duetime's on another core.
        self.moto_in_process = moto_in_process
        self.moto: EmbeddedMoto | MotoProcess | None = None
        self.api: ApiServer | None = None
        self.ports: Ports | None = None
        self.timers: list[Every | Schedule] = []
        self.worker_threads: list[tuple[Worker, threading.Thread]] = []
        self.event_sources: list[SqsEventSource] = []
        self.functions: dict[str, LambdaFunction] = {}
        self.relay: AlertRelay | None = None
        self.secret = ""
        # Modules whose @handlers the worker threads serve (`--handlers`), and the grant rules in their
        # JSON form (`--grants FILE`; None: everyone may use everything).
        self.handler_modules = list(handler_modules)
        self.grants = grants

    def _secret(self) -> str:
        path = self.data_dir / STATE_FILE
        if path.exists():
            try:
                return str(json.loads(path.read_text())["jwtSecret"])
            except (ValueError, KeyError):
                pass
        return secrets.token_urlsafe(32)

    def start(self) -> LocalSystem:
        load_modules(self.handler_modules)  # a module that does not import fails before anything starts
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.secret = self._secret()
        self.moto = (
            EmbeddedMoto(self.moto_port).start() if self.moto_in_process else MotoProcess(self.moto_port).start()
        )
        config = RuntimeConfig(
            prefix=self.prefix,
            endpoint_url=self.moto.endpoint_url,
            shards=self.shards,
            preload_interval_seconds=LOCAL_SETTINGS.preload_interval_seconds,
            preload_window_seconds=LOCAL_SETTINGS.preload_window_seconds,
            lease_seconds=self.lease_seconds,
            jwt_secret=self.secret,
            handler_grants=self.grants,
        )
        settings = config.settings()
        create_tables(make_client("dynamodb", config.region, config.endpoint_url), settings)
        sqs = make_client("sqs", config.region, config.endpoint_url)
        create_queues(sqs, settings)
        self.ports = ports = build_ports(config, self.notifier)
        if self.faithful:
            self._start_functions(config, settings, ports)
        else:
            self._start_direct(settings, ports)
        self._write_state(config)
        # Webhooks signed with secrets under the data dir, which `duetime webhook-secret` prints.
        webhooks = WebhookTarget(FileSecrets(self.data_dir), allow_loopback=settings.allow_loopback_webhooks)
        for job_class in settings.job_classes.values():
            if self.workers > 0 and not (self.faithful and job_class.worker_kind == "lambda"):
                worker = Worker(
                    ports,
                    job_class.name,
                    f"local-{job_class.name}-{secrets.token_hex(2)}",
                    self.workers,
                    targets=Targets(webhook_target=webhooks),
                )
                thread = threading.Thread(target=worker.run, name=f"worker-{job_class.name}", daemon=True)
                thread.start()
                self.worker_threads.append((worker, thread))
        return self

    def _start_direct(self, settings: Settings, ports: Ports) -> None:
        """The use-cases called directly: the API app behind the bridge, pre-load and DLQ drain on timers."""
        app = build_app(ports, local_secret=self.secret)
        self.api = ApiServer(lambda event, context: dict(app.resolve(event, context)), port=self.port).start()
        preloader_id = f"local-preloader-{secrets.token_hex(3)}"
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
        topic_arn, alert_queue_url = create_alert_topic(sns, queues.client, self.prefix)
        self.relay = AlertRelay(queues.client, alert_queue_url, self.notifier).start()
        shared = runtime_environment(
            settings,
            region=config.region,
            queue_urls=json.dumps(queues.queue_urls),
            dlq_urls=json.dumps(queues.dlq_urls),
            lease_seconds=self.lease_seconds,
        )
        # What only the local machine needs: moto's endpoint and no X-Ray daemon (and the API a token secret).
        shared.update(DUETIME_ENDPOINT_URL=str(config.endpoint_url), POWERTOOLS_TRACE_DISABLED="true")
        # The handlers and grants of `--handlers` / `--grants`, and webhook secrets under the data dir, as the
        # stack gives them to the deployed functions.
        shared["DUETIME_WEBHOOK_SECRETS_DIR"] = str(self.data_dir)
        if self.grants is not None:
            shared["DUETIME_HANDLER_GRANTS"] = json.dumps(self.grants)

        def function(name: str, timeout: int, **extra: str) -> LambdaFunction:
            suffix = f"-{extra['job_class']}" if "job_class" in extra else ""
            lambda_function = LambdaFunction(
                name=name,
                function_name=f"{self.prefix}-{name.replace('_', '-')}{suffix}",
                environment=function_environment(name, shared, **extra),
                timeout_seconds=timeout,
                memory_mb=FUNCTION_MEMORY_MB[name],
                region=config.region,
            )
            self.functions[lambda_function.function_name] = lambda_function
            return lambda_function

        api = function("api", API_FUNCTION_TIMEOUT_SECONDS)
        api.environment["DUETIME_JWT_SECRET"] = self.secret  # on AWS, Cognito's authorizer checks tokens
        self.api = ApiServer(lambda event, context: dict(api.invoke(event)), port=self.port).start()
        preloader = function("preloader", settings.preload_interval_seconds)
        notifier = function("dlq_notifier", DLQ_NOTIFIER_TIMEOUT_SECONDS, alert_topic_arn=topic_arn)
        self.timers = [
            Schedule(preloader, settings.preload_interval_seconds, f"{self.prefix}-preload").start(),
            Schedule(notifier, DLQ_NOTIFIER_SECONDS, f"{self.prefix}-drain-dead-letters").start(),
        ]
        if self.workers <= 0:
            return
        for job_class in settings.job_classes.values():
            if job_class.worker_kind != "lambda":
                continue
            worker = function(
                "worker",
                lambda_worker_timeout_seconds(job_class),
                job_class=job_class.name,
                handler_modules=",".join(self.handler_modules),
            )
            source = SqsEventSource(
                queues.client,
                queues.queue_urls[job_class.name],
                worker.invoke,
                batch_size=WORKER_BATCH_SIZE,
                pollers=self.workers,
                region=config.region,
                name=f"worker-{job_class.name}",
            )
            self.event_sources.append(source.start())

    def _write_state(self, config: RuntimeConfig) -> None:
        assert self.moto and self.api
        state = {
            "apiUrl": self.api.url,
            "endpointUrl": self.moto.endpoint_url,
            "region": config.region,
            "prefix": config.prefix,
            "shards": config.shards,
            "leaseSeconds": self.lease_seconds,
            "preloadIntervalSeconds": config.preload_interval_seconds,
            "preloadWindowSeconds": config.preload_window_seconds,
            "jwtSecret": self.secret,
            "handlerGrants": self.grants,
            "pid": os.getpid(),
        }
        path = self.data_dir / STATE_FILE
        path.write_text(json.dumps(state, indent=2))
        path.chmod(0o600)

    def token(self, owner: str = FIRST_USER, worker: bool = False, groups: Sequence[str] = ()) -> str:
        return issue_token(self.secret, owner, worker=worker, groups=groups)

    @property
    def api_url(self) -> str:
        assert self.api is not None
        return self.api.url

    def stop(self) -> None:
        for worker, _ in self.worker_threads:
            worker.stopping.set()
        for timer in self.timers:
            timer.stopped.set()
        for source in self.event_sources:
            source.stop()
        for _, thread in self.worker_threads:
            thread.join(timeout=15)
        if self.relay:
            self.relay.stop()
        if self.api:
            self.api.stop()
        if self.moto:
            self.moto.stop()
