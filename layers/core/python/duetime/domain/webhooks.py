"""Webhook targets (`https://host/path`): which URLs and addresses a job may call, the signature, the outcome."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from duetime.domain.errors import InvalidInput

WEBHOOK_SCHEMES = ("https://", "http://")
# The header names of a delivery; the verify snippet of docs/handlers.md reads the same names.
IDEMPOTENCY_HEADER = "Idempotency-Key"
ATTEMPT_HEADER = "Duetime-Attempt"
OWNER_HEADER = "Duetime-Owner"
TIMESTAMP_HEADER = "Duetime-Timestamp"
SIGNATURE_HEADER = "Duetime-Signature"
SIGNATURE_VERSION = "v1"
# v2 signs the method and URL too, so a request cannot be replayed to another of the owner's endpoints (one
# secret signs all of them). Its own header: a receiver checking v1 with the old snippet goes on working.
SIGNATURE_V2_HEADER = "Duetime-Signature-V2"
SIGNATURE_V2_VERSION = "v2"
SIGNATURE_TOLERANCE_SECONDS = 300
# A timestamp is Unix seconds: never longer than this (a 5,000-digit one must not reach int()).
MAX_TIMESTAMP_DIGITS = 12
# Host names that mean this machine whatever DNS says: refused on AWS, the only names plain http may use locally.
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Named so that a refusal says which range the address is in; anything else not globally routable is
# refused as "reserved". Order matters: the first match names the reason.
FORBIDDEN_NETWORKS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("::/128", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("::1/128", "loopback"),
    ("169.254.0.0/16", "link-local (instance metadata)"),
    ("fe80::/10", "link-local"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "private (carrier-grade NAT)"),
    ("fc00::/7", "private (unique local)"),
    ("224.0.0.0/4", "multicast"),
    ("ff00::/8", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_NETWORKS = tuple((ipaddress.ip_network(net), reason) for net, reason in FORBIDDEN_NETWORKS)
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64, RFC 6052 and RFC 8215).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
# The upper 96 bits of ::ffff:0:0:0/96 (IPv4-translated, RFC 2765); ::/96 (IPv4-compatible) is all zeros.
_IPV4_TRANSLATED_HIGH = 0xFFFF0000
# A last label that is a number (127.1, 2130706433, 0x7f.1, 0177.0.0.1): resolvers read such a host as an
# IPv4 address in a legacy form, and no top-level domain is numeric.
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


def is_webhook(handler: str) -> bool:
    return handler.startswith(WEBHOOK_SCHEMES)


@dataclass(frozen=True)
class WebhookUrl:
    """A checked webhook URL: where to connect and what to ask for."""

    scheme: str
    host: str  # lower case, IPv6 without brackets
    port: int
    path: str  # path and query, never empty

    @property
    def is_loopback_name(self) -> bool:
        return self.host in LOOPBACK_NAMES or self.host.endswith(".localhost")

    @property
    def literal_ip(self) -> IpAddress | None:
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None


def embedded_ipv4(address: IpAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, translated, compatible, 6to4, Teredo, NAT64), if any.

    Python calls IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d) addresses global, and a
    stack may still route them to the IPv4 address they carry: they are judged by that address.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    high, low = int(address) >> 32, int(address) & 0xFFFFFFFF
    if high == _IPV4_TRANSLATED_HIGH or (high == 0 and int(address) > 1):  # :: and ::1 are their own
        return ipaddress.IPv4Address(low)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden_reason(address: IpAddress, allow_loopback: bool = False) -> str | None:
    """Why a webhook may not connect to `address` (loopback, link-local, private, multicast, unspecified,
    reserved), or None when it is a public address. `allow_loopback` is for `duetime local`."""
    inner = embedded_ipv4(address)
    if inner is not None:
        reason = forbidden_reason(inner, allow_loopback)
        return f"{reason} (embedded in {address})" if reason else None
    for network, reason in _NETWORKS:
        if address.version == network.version and address in network:
            if reason == "loopback" and allow_loopback:
                return None
            return reason
    if address.is_multicast:
        return "multicast"
    if not address.is_global:
        return "reserved"
    return None


def split_webhook_url(url: str) -> WebhookUrl:
    """The parts of a webhook URL as the worker will call it (scheme, host as connected to, port, path and
    query); raises InvalidInput naming `handler` for a URL that is not http(s) with a host, carries user
    info or a fragment, or whose host or path cannot be sent as given. No address policy: see
    parse_webhook_url."""
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise InvalidInput("the webhook URL must not contain spaces or control characters", field="handler")
    try:
        parts = urlsplit(url)
        port = parts.port
        host = (parts.hostname or "").rstrip(".")
    except ValueError as exc:
        raise InvalidInput(f"malformed webhook URL: {exc}", field="handler") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise InvalidInput("a webhook URL must start with https://", field="handler")
    if not host:
        raise InvalidInput("the webhook URL has no host", field="handler")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("the webhook URL must not carry credentials: requests are signed", field="handler")
    if parts.fragment:
        raise InvalidInput("the webhook URL must not have a #fragment", field="handler")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError as exc:
        raise InvalidInput(f"the webhook host {host!r} is not a valid domain name", field="handler") from exc
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    if not path.isascii():
        raise InvalidInput("the webhook URL's path and query must be ASCII: percent-encode them", field="handler")
    return WebhookUrl(scheme=scheme, host=host.lower(), port=port or default_port(scheme), path=path)


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def parse_webhook_url(url: str, allow_loopback: bool = False) -> WebhookUrl:
    """Check a webhook handler as far as can be without DNS; raises InvalidInput naming `handler`.

    Refused: anything but http(s) with a host, user info in the URL (it would be stored and listed),
    a literal IP in a forbidden range, a loopback host name unless `allow_loopback`, and plain `http:`
    to anything but loopback (allowed only with `allow_loopback`, i.e. by `duetime local`).
    """
    target = split_webhook_url(url)
    host = target.host
    scheme = target.scheme
    literal = target.literal_ip
    if literal is not None:
        reason = forbidden_reason(literal, allow_loopback)
        if reason:
            raise InvalidInput(f"webhook host {host} is a {reason} address", field="handler")
    elif _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        raise InvalidInput(
            f"webhook host {host!r} is an IPv4 address in a legacy numeric form: write it as a.b.c.d",
            field="handler",
        )
    elif target.is_loopback_name and not allow_loopback:
        raise InvalidInput(f"webhook host {host} is a loopback address", field="handler")
    elif not target.is_loopback_name and "." not in host:
        raise InvalidInput(f"webhook host {host!r} is not a fully qualified domain name", field="handler")
    if scheme == "http":
        loopback = target.is_loopback_name or (literal is not None and literal.is_loopback)
        if not (allow_loopback and loopback):
            where = "loopback hosts of `duetime local`" if allow_loopback else "nothing on AWS"
            raise InvalidInput(f"a webhook URL must be https:// (plain http:// is for {where})", field="handler")
    return target


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The Duetime-Signature header: "v1=" and the hex HMAC-SHA256 of "<timestamp>.<body>" keyed by `secret`."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def signed_url(target: WebhookUrl) -> str:
    """The URL v2 signs: scheme and host in lower case, the port only when not the scheme's default, then
    the path and query as the job gives them (`/` when it gives none)."""
    host = f"[{target.host}]" if ":" in target.host else target.host
    port = "" if target.port == default_port(target.scheme) else f":{target.port}"
    return f"{target.scheme}://{host}{port}{target.path}"


def sign_v2(secret: str, timestamp: int | str, method: str, url: str, body: bytes) -> str:
    """The Duetime-Signature-V2 header: "v2=" and the hex HMAC-SHA256, keyed by `secret`, of
    "<timestamp>\\n<METHOD>\\n<url>\\n<body>" (`url` as signed_url gives it)."""
    signed = f"{timestamp}\n{method.upper()}\n{url}\n".encode() + body
    return f"{SIGNATURE_V2_VERSION}={hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()}"


def _header(headers: Mapping[str, object], name: str) -> object:
    """A header's value whatever the case of its name (a plain dict keeps the sender's case)."""
    if name in headers:
        return headers[name]
    wanted = name.lower()
    return next((value for key, value in headers.items() if str(key).lower() == wanted), None)


def verify_request(
    secret: str,
    headers: Mapping[str, object],
    body: bytes,
    url: str,
    method: str = "POST",
    tolerance_seconds: int = SIGNATURE_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """True if duetime signed this request (v2) with `secret` for `method` and `url`, at most
    `tolerance_seconds` from `now`. Never raises on what a sender controls: a missing, non-ASCII or
    malformed header is False. `url` is this endpoint's URL; signed_url's rules make it comparable."""
    timestamp, signature = _header(headers, TIMESTAMP_HEADER), _header(headers, SIGNATURE_V2_HEADER)
    if not isinstance(timestamp, str) or not isinstance(signature, str) or not signature.isascii():
        return False
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= MAX_TIMESTAMP_DIGITS):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_seconds:
        return False  # too old, or from the future: a replay
    try:
        expected = sign_v2(secret, timestamp, method, signed_url(split_webhook_url(url)), body)
    except InvalidInput:
        return False
    return hmac.compare_digest(expected.encode(), signature.encode())


class Reply(StrEnum):
    """What a webhook's HTTP status means for the attempt."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"
    PERMANENT = "permanent"


def classify_status(status: int) -> Reply:
    """2xx succeeds; 408, 429 and 5xx retry; any other status (4xx, a redirect, which is never followed)
    fails permanently."""
    if 200 <= status < 300:
        return Reply.SUCCEEDED
    if status in (408, 429) or 500 <= status < 600:
        return Reply.RETRY
    return Reply.PERMANENT
