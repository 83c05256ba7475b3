"""A real webhook receiver for tests: http.server on 127.0.0.1 in a thread, answering from a script and
checking every request with the verify snippet of docs/handlers.md (read from it and executed as it is)."""

from __future__ import annotations

import json
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SNIPPET_PAGE = Path(__file__).resolve().parents[1] / "docs" / "handlers.md"
SNIPPET_MARKER = "<!-- webhook-verify-snippet -->"


def readme_verify() -> Callable[..., bool]:
    """`verify_duetime_request` exactly as docs/handlers.md shows it."""
    text = SNIPPET_PAGE.read_text()
    after = text[text.index(SNIPPET_MARKER) :]
    found = re.search(r"```python\n(.*?)```", after, re.S)
    assert found, "the verify snippet of docs/handlers.md is missing"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), "docs/handlers.md#webhook-verify-snippet", "exec"), namespace)
    return namespace["verify_duetime_request"]  # type: ignore[no-any-return]


@dataclass
class Answer:
    """One scripted reply: a status and body, or a hang (no answer until the test ends)."""

    status: int = 200
    body: bytes = b""
    hang: bool = False


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    arrived: float = field(default_factory=time.monotonic)
    closed_by_client_after: float | None = None  # for a hang: seconds until the client hung up

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    secret: Callable[[str], str]  # the signing secret of an owner, as the receiver was configured
    script: list[Answer] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def answer(self) -> Answer:
        return self.script.pop(0) if self.script else Answer(200, b'{"ok": true}')


@contextmanager
def receiver(
    secret: Callable[[str], str],
    script: list[Answer] | None = None,
    tls: ssl.SSLContext | None = None,
    host: str = "127.0.0.1",
) -> Iterator[Receiver]:
    """A receiver at `receiver.url` (http://127.0.0.1:PORT/hook, or https://HOST:PORT/hook with `tls`, still
    listening on 127.0.0.1) for the length of the block."""
    verify = readme_verify()
    state = Receiver(secret=secret, script=list(script or []))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items()}
            owner = headers.get("Duetime-Owner", "")
            url = state.url.removesuffix("/hook") + self.path  # this endpoint's URL, as docs/handlers.md says
            request = Received(self.path, headers, body, verify(state.secret(owner), headers, body, url))
            with lock:
                answer = state.answer()
                state.requests.append(request)
            if answer.hang:  # answer nothing; note when the client gives up and closes the connection
                while not state.released.is_set():
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                        request.closed_by_client_after = time.monotonic() - request.arrived
                        return
                return
            self.send_response(answer.status)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    state.url = f"{'https' if tls else 'http'}://{host}:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
