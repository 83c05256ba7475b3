"""An embedded moto server whose DynamoDB requests are serialized, so conditional writes stay atomic."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
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


class EmbeddedMoto:
    """moto's server on 127.0.0.1 in a background thread."""

    def __init__(self, port: int = 0) -> None:
        self.app = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
        self.server: BaseWSGIServer = make_server("127.0.0.1", port, self.app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto", daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> EmbeddedMoto:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
