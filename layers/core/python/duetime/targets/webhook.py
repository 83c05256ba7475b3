"""Adapter for `https:` webhook handlers: resolve, check and pin the address, POST the signed run, read the reply."""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from duetime.adapters.aws.secrets import MissingWebhookSecret, WebhookSecrets
from duetime.definitions import WEBHOOK_CONNECT_TIMEOUT_SECONDS, WEBHOOK_MAX_REPLY_BYTES
from duetime.domain.errors import InvalidInput
from duetime.domain.webhooks import (
    ATTEMPT_HEADER,
    IDEMPOTENCY_HEADER,
    OWNER_HEADER,
    SIGNATURE_HEADER,
    SIGNATURE_V2_HEADER,
    TIMESTAMP_HEADER,
    IpAddress,
    WebhookUrl,
    forbidden_reason,
    parse_webhook_url,
    sign,
    sign_v2,
    signed_url,
)

USER_AGENT = "duetime-webhook/1"
# How often the request's watcher looks whether the run was told to stop (timeout, lost lease).
CANCEL_POLL_SECONDS = 0.1

Resolver = Callable[[str, int], Sequence[str]]


class WebhookRefused(Exception):
    """The request is not sent and never will be: a forbidden address, a bad URL or no secret (permanent)."""


@dataclass(frozen=True)
class Delivery:
    """The webhook's answer: its status and at most WEBHOOK_MAX_REPLY_BYTES + 1 bytes of its body."""

    status: int
    body: bytes

    @property
    def too_large(self) -> bool:
        return len(self.body) > WEBHOOK_MAX_REPLY_BYTES


def resolve_addresses(host: str, port: int) -> list[str]:
    """Every address DNS gives `host`, in its order, each once."""
    found: list[str] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


def header_safe(value: str) -> str:
    """`value` as an HTTP header value: itself when printable ASCII, else percent-encoded (UTF-8)."""
    return value if value.isascii() and value.isprintable() else quote(value, safe="")


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Plain HTTP to one checked address; the Host header keeps the URL's host."""

    def __init__(self, host: str, port: int, address: str, connect_timeout: float) -> None:
        super().__init__(host, port, timeout=connect_timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock.settimeout(None)  # bounded by the run's cancellation from here on (WebhookTarget.deliver)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to one checked address, verified against the URL's host name (SNI and certificate), never re-resolved."""

    def __init__(self, host: str, port: int, address: str, connect_timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=connect_timeout, context=context)
        self.address = address
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        self.sock.settimeout(None)


class WebhookTarget:
    """POSTs a run's JSON to a webhook, signed with its owner's secret, to an address checked after DNS.

    `allow_loopback` (`duetime local`) lets requests reach this machine, plain http included; every
    other forbidden range (link-local and instance metadata, private, multicast, reserved) stays refused.
    """

    def __init__(
        self,
        secrets: WebhookSecrets,
        allow_loopback: bool = False,
        resolve: Resolver = resolve_addresses,
        now: Callable[[], float] = time.time,
        connect_timeout: float = WEBHOOK_CONNECT_TIMEOUT_SECONDS,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.secrets = secrets
        self.allow_loopback = allow_loopback
        self.resolve = resolve
        self.now = now
        self.connect_timeout = connect_timeout
        self.tls = tls or ssl.create_default_context()

    def checked_addresses(self, target: WebhookUrl) -> list[IpAddress]:
        """The target's addresses after DNS; raises WebhookRefused if any is in a forbidden range (a name
        with one public and one private address is refused: which one a client picks is not ours to bet on)."""
        literal = target.literal_ip
        try:
            raw = [str(literal)] if literal is not None else list(self.resolve(target.host, target.port))
        except OSError as exc:
            raise ConnectionError(f"cannot resolve webhook host {target.host}: {exc}") from exc
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in raw]
        if not addresses:
            raise ConnectionError(f"webhook host {target.host} has no address")
        for address in addresses:
            reason = forbidden_reason(address, self.allow_loopback)
            if reason:
                raise WebhookRefused(f"webhook host {target.host} resolves to {address}, a {reason} address")
            if target.scheme == "http" and not address.is_loopback:
                raise WebhookRefused(f"plain http:// to {target.host} resolves to {address}, not loopback")
        return addresses

    def deliver(
        self,
        url: str,
        owner: str,
        execution_id: str,
        attempt: int,
        body: bytes,
        cancelled: threading.Event,
    ) -> Delivery:
        """POST `body` to `url` until it answers or `cancelled` is set (the job's timeout, a lost lease).

        Raises WebhookRefused (permanent), InterruptedError when told to stop, and OSError or
        http.client.HTTPException for connection and protocol failures (worth another attempt).
        """
        try:
            target = parse_webhook_url(url, self.allow_loopback)
        except InvalidInput as exc:
            raise WebhookRefused(exc.message) from exc
        addresses = self.checked_addresses(target)
        try:
            secret = self.secrets.secret_for(owner)
        except MissingWebhookSecret as exc:
            raise WebhookRefused(str(exc)) from exc
        timestamp = int(self.now())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            IDEMPOTENCY_HEADER: execution_id,
            ATTEMPT_HEADER: str(attempt),
            OWNER_HEADER: header_safe(owner),
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(secret, timestamp, body),
            SIGNATURE_V2_HEADER: sign_v2(secret, timestamp, "POST", signed_url(target), body),
        }
        last_error: OSError | None = None
        for address in addresses:
            if cancelled.is_set():
                break
            connection = self._connection(target, str(address))
            try:
                return self._exchange(connection, target, body, headers, cancelled)
            except ConnectionRefusedError as exc:  # nothing listens there: the next address may answer
                last_error = exc
            finally:
                connection.close()
        if cancelled.is_set():
            raise InterruptedError("webhook request stopped: the run was told to stop")
        raise ConnectionError(f"webhook {target.host}:{target.port} refused the connection: {last_error}")

    def _connection(self, target: WebhookUrl, address: str) -> http.client.HTTPConnection:
        if target.scheme == "https":
            return _PinnedHTTPSConnection(target.host, target.port, address, self.connect_timeout, self.tls)
        return _PinnedHTTPConnection(target.host, target.port, address, self.connect_timeout)

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        target: WebhookUrl,
        body: bytes,
        headers: dict[str, str],
        cancelled: threading.Event,
    ) -> Delivery:
        finished = threading.Event()
        watcher = threading.Thread(
            target=_abort_when_cancelled, args=(connection, cancelled, finished), name="webhook-watch", daemon=True
        )
        watcher.start()
        try:
            connection.request("POST", target.path, body=body, headers=headers)
            response = connection.getresponse()
            reply = response.read(WEBHOOK_MAX_REPLY_BYTES + 1)
            return Delivery(status=response.status, body=reply)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if cancelled.is_set():
                raise InterruptedError("webhook request stopped: the run was told to stop") from exc
            if not isinstance(exc, OSError | http.client.HTTPException):  # a socket closed under http.client
                raise ConnectionError(f"webhook {target.host}: {exc}") from exc
            raise
        finally:
            finished.set()
            watcher.join()


def _abort_when_cancelled(connection: Any, cancelled: threading.Event, finished: threading.Event) -> None:
    """Shut the connection's socket once the run is told to stop, which wakes its blocked read at once (a
    connect still under way ends within the connect timeout, then is shut)."""
    while not finished.is_set():
        if not cancelled.wait(CANCEL_POLL_SECONDS):
            continue
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return
        finished.wait(CANCEL_POLL_SECONDS)
