"""An embedded moto server whose DynamoDB requests are serialized, so conditional writes stay atomic.

It runs in a thread of this process, or (`MotoProcess`) in a process of its own, so that moto's CPU
work and duetime's own run on both cores instead of sharing one interpreter lock.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class SerializedDynamoDB:
    """WSGI middleware: one DynamoDB request at a time (moto's backends take no locks). SQS requests are
    not serialized: a long poll blocks inside moto waiting for a send, which must still get through."""

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self._count_lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        with self._count_lock:
            name = target or environ.get("PATH_INFO", "")
            self.calls[name] = self.calls.get(name, 0) + 1
        if target.startswith("DynamoDB_"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class KeepAliveHandler(MotoRequestHandler):
    """HTTP/1.1: boto3 keeps its connections open instead of connecting anew for every request."""

    protocol_version = "HTTP/1.1"


class EmbeddedMoto:
    """moto's server on 127.0.0.1 in a background thread of this process."""

    def __init__(self, port: int = 0) -> None:
        self.app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
        self.server: BaseWSGIServer = make_server(
            "127.0.0.1", port, self.app, threaded=True, request_handler=KeepAliveHandler
        )
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto", daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> EmbeddedMoto:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()


class MotoProcess:
    """The same server in a child process (`python -m duetime.local.moto_server`); it ends with us."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self._endpoint = ""

    @property
    def endpoint_url(self) -> str:
        return self._endpoint

    def start(self, timeout: float = 30.0) -> MotoProcess:
        command = [
            sys.executable,
            "-m",
            "duetime.local.moto_server",
            "--port",
            str(self.port),
            "--parent",
            str(os.getpid()),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline().strip()  # the child prints its endpoint once it listens
        if not line.startswith("http://") or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"the moto server did not start: {line!r}")
        self._endpoint = line
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _watch_parent(parent: int) -> None:
    """End this server when the process that started it is gone (even if it was killed)."""
    while True:
        time.sleep(1)
        try:
            os.kill(parent, 0)
        except OSError:
            os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="duetime's embedded moto server, in a process of its own")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent", type=int, default=0)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = EmbeddedMoto(args.port)
    if args.parent:
        threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    print(server.endpoint_url, flush=True)
    server.server.serve_forever()


if __name__ == "__main__":
    main()
