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

# A client gets this long per read of its request line, headers or body, and READ_DEADLINE_SECONDS for its
# whole body: one that sends slower is answered 408 (or, before its request line, disconnected), so a
# stalled or trickling client cannot hold a thread for ever. A kept-alive connection idle that long closes.
READ_TIMEOUT_SECONDS = 10.0
READ_DEADLINE_SECONDS = 30.0
# Connections the kernel completes and queues before the server accepts them: socketserver's 5 reset a
# burst of concurrent clients (12 of 30 POSTs); `duetime load` and the documented bursts open more at once.
LISTEN_BACKLOG = 1024
# A chunked body's size lines and trailers are short; a longer line is a malformed or hostile request.
MAX_CHUNK_LINE_BYTES = 1024
MAX_TRAILER_LINES = 32


class BodyRefused(Exception):
    """A request body that cannot be read as sent: the status and error to answer (the connection closes)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = {"code": code, "message": message, **({"field": field} if field else {})}


class _Reader:
    """Reads a request body from `rfile` within `deadline` (a time.monotonic() instant)."""

    def __init__(self, rfile: Any, deadline: float) -> None:
        self.rfile = rfile
        self.deadline = deadline

    def _check(self) -> None:
        if time.monotonic() > self.deadline:
            raise BodyRefused(408, "request_timeout", "the request body was not received in time")

    def read(self, length: int) -> bytes:
        parts: list[bytes] = []
        left = length
        while left > 0:
            self._check()
            try:
                part = self.rfile.read1(min(left, 65536))
            except TimeoutError as exc:
                raise BodyRefused(408, "request_timeout", "the request body was not received in time") from exc
            if not part:
                raise BodyRefused(400, "invalid_input", "the connection closed before the whole body arrived")
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def line(self) -> bytes:
        self._check()
        try:
            line: bytes = self.rfile.readline(MAX_CHUNK_LINE_BYTES + 1)
        except TimeoutError as exc:
            raise BodyRefused(408, "request_timeout", "the request body was not received in time") from exc
        if len(line) > MAX_CHUNK_LINE_BYTES or not line.endswith(b"\n"):
            raise BodyRefused(400, "invalid_input", "a malformed chunked body", "Transfer-Encoding")
        return line

    def chunked(self, limit: int = API_MAX_BODY_BYTES) -> bytes:
        """A `Transfer-Encoding: chunked` body, decoded; 413 once it grows past `limit`."""
        parts: list[bytes] = []
        total = 0
        while True:
            size_text = self.line().split(b";", 1)[0].strip()
            if not size_text or len(size_text) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                raise BodyRefused(400, "invalid_input", "a malformed chunk size", "Transfer-Encoding")
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > limit:
                raise BodyRefused(
                    413, "payload_too_large", f"the body is larger than {limit} bytes", "Transfer-Encoding"
                )
            parts.append(self.read(size))
            if self.read(2) != b"\r\n":
                raise BodyRefused(400, "invalid_input", "a chunk not followed by CRLF", "Transfer-Encoding")
        for _ in range(MAX_TRAILER_LINES):  # trailers, if any, up to the empty line; their values are dropped
            if self.line() in (b"\r\n", b"\n"):
                return b"".join(parts)
        raise BodyRefused(400, "invalid_input", "too many trailer lines", "Transfer-Encoding")


def read_body(headers: Any, rfile: Any, deadline: float) -> bytes:
    """The request's body as its headers frame it: Content-Length, or `Transfer-Encoding: chunked` (decoded).
    Raises BodyRefused: 400 for a malformed length, both framings at once (the ambiguity request smuggling
    lives on) or another transfer coding, 411 for a body framed by neither, 413 above the limit, 408 when
    it arrives too slowly."""
    codings = [c.strip().lower() for v in headers.get_all("Transfer-Encoding") or [] for c in v.split(",")]
    lengths = headers.get_all("Content-Length") or []
    reader = _Reader(rfile, deadline)
    if codings:
        if lengths:
            raise BodyRefused(
                400, "invalid_input", "give Content-Length or Transfer-Encoding, not both", "Content-Length"
            )
        if codings != ["chunked"]:
            raise BodyRefused(400, "invalid_input", "the only transfer coding served is chunked", "Transfer-Encoding")
        return reader.chunked()
    length, refusal = body_length(lengths)
    if refusal is not None:
        status, error = refusal
        raise BodyRefused(status, error["code"], error["message"], error.get("field"))
    return reader.read(length) if length else b""


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


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG


class ApiServer:
    """Serves `handler` (an API Gateway Lambda handler) on 127.0.0.1:`port`, or on `listener`: a listening
    socket another process made and shares (`shared_listener`), so several processes answer on one port."""

    def __init__(
        self,
        handler: Handler,
        port: int = 8080,
        host: str = "127.0.0.1",
        listener: socket.socket | None = None,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        read_deadline: float = READ_DEADLINE_SECONDS,
    ) -> None:
        bridge = self
        self.read_deadline = read_deadline

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One send per response: headers and body in one buffered write (flushed by the server after
            # each request), and no Nagle delay. Written in two sends, the body waited for the client's
            # delayed ACK of the headers: ~40 ms a request on a kept-alive connection.
            wbufsize = -1
            disable_nagle_algorithm = True
            timeout = read_timeout  # each read of a request (and an idle kept-alive connection) waits this long

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
                try:
                    body = read_body(self.headers, self.rfile, time.monotonic() + bridge.read_deadline)
                except BodyRefused as refused:
                    self._refuse(refused.status, refused.error)
                    return
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
            self.server = _Server((host, port), RequestHandler)
        else:
            self.server = _Server(listener.getsockname(), RequestHandler, bind_and_activate=False)
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
