"""A local HTTP server that turns each request into an API Gateway (REST) event for the API handler."""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from duetime.console import console_file
from duetime.definitions import API_MAX_BODY_BYTES

log = logging.getLogger("duetime.local.http")
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def to_event(method: str, target: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The API Gateway REST proxy event for one HTTP request."""
    parts = urlsplit(target)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = dict(pairs)
    multi_query: dict[str, list[str]] = {}
    for name, value in pairs:  # a repeated parameter (GET /jobs?tag=..&tag=..) keeps every value
        multi_query.setdefault(name, []).append(value)
    try:
        text: str | None = body.decode("utf-8") if body else None
        encoded = False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": parts.path,
        "path": parts.path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "httpMethod": method,
            "path": parts.path,
            "stage": "local",
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": "127.0.0.1"},
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


def body_length(values: list[str], limit: int = API_MAX_BODY_BYTES) -> tuple[int, tuple[int, dict[str, str]] | None]:
    """The body length a request declares in its Content-Length header(s), or the status and error to
    answer instead: 400 for a malformed, negative or repeated-and-differing value (reading a negative
    length would block the thread), 413 above `limit`, as API Gateway refuses a larger body."""
    field = "Content-Length"
    distinct = {v.strip() for v in values}
    if not distinct:
        return 0, None
    text = distinct.pop()
    if distinct or not text.isascii() or not text.isdigit():
        message = "Content-Length must be one non-negative whole number"
        return 0, (400, {"code": "invalid_input", "message": message, "field": field})
    digits = text.lstrip("0") or "0"
    length = int(digits) if len(digits) <= len(str(limit)) else limit + 1  # never parse a 5000-digit number
    if length > limit:
        message = f"the body is larger than {limit} bytes"
        return 0, (413, {"code": "payload_too_large", "message": message, "field": field})
    return length, None


def send_console_file(request: BaseHTTPRequestHandler) -> bool:
    """Answer a GET under /console with the console's static file; False for any other path."""
    found = console_file(urlsplit(request.path).path)
    if found is None:
        return False
    request.send_response(found.status)
    for name, value in found.headers.items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(found.body)))
    request.end_headers()
    request.wfile.write(found.body)
    return True


class ApiServer:
    """Serves `handler` (an API Gateway Lambda handler) on 127.0.0.1:`port`, or on `listener`: a listening
    socket another process made and shares (`shared_listener`), so several processes answer on one port."""

    def __init__(
        self, handler: Handler, port: int = 8080, host: str = "127.0.0.1", listener: socket.socket | None = None
    ) -> None:
        bridge = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One send per response: headers and body in one buffered write (flushed by the server after
            # each request), and no Nagle delay. Written in two sends, the body waited for the client's
            # delayed ACK of the headers: ~40 ms a request on a kept-alive connection.
            wbufsize = -1
            disable_nagle_algorithm = True

            def _refuse(self, status: int, error: dict[str, str]) -> None:
                """Answer `error` as the API would, and close: an unread body must not be taken for the
                next request on this connection."""
                data = json.dumps({"error": error}).encode()
                self.close_connection = True
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                length, refusal = body_length(self.headers.get_all("Content-Length") or [])
                if refusal is not None:
                    self._refuse(*refusal)
                    return
                body = self.rfile.read(length) if length else b""
                if bridge.stopped.is_set():
                    # A kept-alive connection outlives the listener: refuse, so the client tries again
                    # against the next `duetime local` instead of reaching a store being closed.
                    self._refuse(503, {"code": "unavailable", "message": "duetime local is stopping"})
                    return
                event = to_event(self.command, self.path, dict(self.headers.items()), body)
                try:
                    response = bridge.handler(event, None)
                except Exception:  # a bug must still answer, as API Gateway would with 502
                    log.exception("handler failed")
                    response = {
                        "statusCode": 500,
                        "headers": {"Content-Type": "application/json"},
                        "body": json.dumps({"error": {"code": "internal", "message": "internal error"}}),
                    }
                payload = response.get("body") or ""
                data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload.encode()
                self.send_response(int(response.get("statusCode", 200)))
                headers = dict(response.get("headers") or {})
                for name, values in (response.get("multiValueHeaders") or {}).items():
                    headers.setdefault(name, values[0] if values else "")
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "connection"):
                        self.send_header(name, str(value))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if not send_console_file(self):
                    self._serve()

            do_POST = do_PATCH = do_DELETE = do_PUT = _serve

            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

        self.handler = handler
        self.stopped = threading.Event()
        if listener is None:
            self.server = ThreadingHTTPServer((host, port), RequestHandler)
        else:
            self.server = ThreadingHTTPServer(listener.getsockname(), RequestHandler, bind_and_activate=False)
            self.server.socket.close()  # the unbound socket made in its stead
            self.server.socket = listener
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name}:{port}"

    def shared_listener(self) -> socket.socket:
        """The listening socket, to hand to other processes that accept connections from it too. Non-blocking
        from now on, here and there: every process polls it, and one that loses the race for a connection
        must find none (socketserver then goes back to polling) instead of blocking in accept()."""
        self.server.socket.setblocking(False)
        return self.server.socket

    def start(self) -> ApiServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
