"""`duetime local`: the whole system on one machine, the same code over SQLite (default) or embedded moto."""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.local.backends import DEFAULT_BACKEND, LocalBackend, local_settings, start_backend
from duetime.local.http_bridge import ApiServer
from duetime.local.state import LocalState, previous_state
from duetime.service.context import Notifier, Ports
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.worker.runtime import RunRecord, Worker

if TYPE_CHECKING:  # moto is imported by the moto backend alone
    from duetime.local.moto_server import EmbeddedMoto, MotoProcess

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
    """The backend (a SQLite file, or moto) with the tables and queues of the shared definitions, the API
    on HTTP, the pre-loader and DLQ notifier on timers, and worker threads per job class."""

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
        backend: str = DEFAULT_BACKEND,
        on_run: Callable[[RunRecord], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port, self.workers, self.lease_seconds = port, workers, lease_seconds
        self.moto_port, self.shards = moto_port, shards
        self.notifier = notifier
        self.prefix = prefix  # moto servers in one process share their backends: a prefix keeps them apart
        # moto in a process of its own by default: its CPU work then runs beside duetime's on another core.
        self.moto_in_process = moto_in_process
        self.backend_name = backend
        self.on_run = on_run
        self.backend: LocalBackend | None = None
        self.moto: EmbeddedMoto | MotoProcess | None = None
        self.api: ApiServer | None = None
        self.ports: Ports | None = None
        self.timers: list[Every] = []
        self.worker_threads: list[tuple[Worker, threading.Thread]] = []
        self.secret = ""

    def start(self) -> LocalSystem:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # A restart on the same data dir keeps the secret (tokens stay valid) and the pre-loader's owner:
        # on SQLite its shard leases outlive a killed process, and the same owner resumes them at once.
        before = previous_state(self.data_dir)
        self.secret = before.jwt_secret if before else secrets.token_urlsafe(32)
        resumed = before.preloader_id if before and before.backend == self.backend_name else None
        preloader_id = resumed or f"local-preloader-{secrets.token_hex(3)}"
        settings = local_settings(self.backend_name, self.prefix, self.shards, self.lease_seconds)
        self.backend = start_backend(
            self.backend_name, self.data_dir, settings, self.notifier, self.moto_port, self.moto_in_process
        )
        self.moto = self.backend.moto
        self.ports = ports = self.backend.ports
        app = build_app(ports, local_secret=self.secret)
        self.api = ApiServer(lambda event, context: dict(app.resolve(event, context)), port=self.port).start()
        self._write_state(preloader_id)
        self.timers = [
            Every("preloader", settings.preload_interval_seconds, lambda: preload(ports, preloader_id)).start(),
            Every("dlq-notifier", 2, lambda: [drain_dead_letters(ports, c) for c in settings.job_classes]).start(),
            *(Every(name, seconds, fn).start() for name, seconds, fn in self.backend.housekeeping),
        ]
        if self.workers > 0:
            for job_class in settings.job_classes:
                worker_id = f"local-{job_class}-{secrets.token_hex(2)}"
                worker = Worker(ports, job_class, worker_id, self.workers, on_run=self.on_run)
                thread = threading.Thread(target=worker.run, name=f"worker-{job_class}", daemon=True)
                thread.start()
                self.worker_threads.append((worker, thread))
        return self

    def _write_state(self, preloader_id: str) -> None:
        assert self.backend and self.api
        settings = self.backend.ports.settings
        LocalState(
            backend=self.backend.name,
            api_url=self.api.url,
            endpoint_url=self.backend.endpoint_url,
            database_file=self.backend.database_file,
            region=self.backend.region,
            prefix=settings.prefix,
            shards=settings.shards,
            lease_seconds=self.lease_seconds,
            preload_interval_seconds=settings.preload_interval_seconds,
            preload_window_seconds=settings.preload_window_seconds,
            jwt_secret=self.secret,
            preloader_id=preloader_id,
            pid=os.getpid(),
        ).write(self.data_dir)

    def token(self, owner: str = FIRST_USER, worker: bool = False) -> str:
        return issue_token(self.secret, owner, worker=worker)

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
        if self.backend:
            self.backend.stop()
