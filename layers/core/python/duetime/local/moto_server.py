"""An embedded moto server whose DynamoDB requests are serialized, so conditional writes stay atomic.

It runs in a thread of this process, or (`MotoProcess`) in a process of its own, so that moto's CPU
work and duetime's own run on both cores instead of sharing one interpreter lock.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
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


class SecretPath:
    """WSGI middleware: only requests whose path starts with `/<secret>` reach moto (the prefix removed).

    moto's server has no authentication, and its `/moto-api/reset` route wipes every table and queue: any
    web page the developer opens could POST to it on loopback. The secret is part of the endpoint URL that
    duetime's boto3 clients are given (botocore keeps an endpoint's path in front of every request path),
    and lives only in this process and the 0600 local.json, so nobody else can address moto at all.
    """

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]], secret: str) -> None:
        self.app = app
        self.prefix = f"/{secret}"

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            start_response("403 Forbidden", [("Content-Type", "text/plain"), ("Content-Length", "9")])
            return [b"forbidden"]
        environ["PATH_INFO"] = path[len(self.prefix) :] or "/"
        for name in ("RAW_URI", "REQUEST_URI"):  # werkzeug's raw request line, which moto routes some services by
            if name in environ:
                environ[name] = str(environ[name])[len(self.prefix) :] or "/"
        return self.app(environ, start_response)


class KeepAliveHandler(MotoRequestHandler):
    """HTTP/1.1: boto3 keeps its connections open instead of connecting anew for every request."""

    protocol_version = "HTTP/1.1"


class EmbeddedMoto:
    """moto's server on 127.0.0.1 in a background thread of this process, reachable only through
    `endpoint_url`, whose path carries a random secret (SecretPath)."""

    def __init__(self, port: int = 0, secret: str | None = None) -> None:
        self.secret = secret or secrets.token_hex(16)
        self.app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
        self.server: BaseWSGIServer = make_server(
            "127.0.0.1", port, SecretPath(self.app, self.secret), threaded=True, request_handler=KeepAliveHandler
        )
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto", daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{self.secret}"

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
