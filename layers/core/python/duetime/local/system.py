"""`duetime local`: the whole system on one machine, the same code over an embedded moto server."""

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
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import LOCAL_SETTINGS
from duetime.local.http_bridge import ApiServer
from duetime.local.moto_server import EmbeddedMoto, MotoProcess
from duetime.local.state import STATE_FILE
from duetime.queue.provision import create_queues
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
    notifier on timers, and worker threads per job class."""

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
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port, self.workers, self.lease_seconds = port, workers, lease_seconds
        self.moto_port, self.shards = moto_port, shards
        self.notifier = notifier
        self.prefix = prefix  # moto servers in one process share their backends: a prefix keeps them apart
        # moto in a process of its own by default: its CPU work then runs beside duetime's on another core.
        self.moto_in_process = moto_in_process
        self.moto: EmbeddedMoto | MotoProcess | None = None
        self.api: ApiServer | None = None
        self.ports: Ports | None = None
        self.timers: list[Every] = []
        self.worker_threads: list[tuple[Worker, threading.Thread]] = []
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
        create_queues(make_client("sqs", config.region, config.endpoint_url), settings)
        self.ports = ports = build_ports(config, self.notifier)
        app = build_app(ports, local_secret=self.secret)
        self.api = ApiServer(lambda event, context: dict(app.resolve(event, context)), port=self.port).start()
        self._write_state(config)
        preloader_id = f"local-preloader-{secrets.token_hex(3)}"
        self.timers = [
            Every("preloader", settings.preload_interval_seconds, lambda: preload(ports, preloader_id)).start(),
            Every("dlq-notifier", 2, lambda: [drain_dead_letters(ports, c) for c in settings.job_classes]).start(),
        ]
        # Webhooks signed with secrets under the data dir, which `duetime webhook-secret` prints.
        webhooks = WebhookTarget(FileSecrets(self.data_dir), allow_loopback=settings.allow_loopback_webhooks)
        if self.workers > 0:
            for job_class in settings.job_classes:
                worker = Worker(
                    ports,
                    job_class,
                    f"local-{job_class}-{secrets.token_hex(2)}",
                    self.workers,
                    targets=Targets(webhook_target=webhooks),
                )
                thread = threading.Thread(target=worker.run, name=f"worker-{job_class}", daemon=True)
                thread.start()
                self.worker_threads.append((worker, thread))
        return self

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
        for _, thread in self.worker_threads:
            thread.join(timeout=15)
        if self.api:
            self.api.stop()
        if self.moto:
            self.moto.stop()
