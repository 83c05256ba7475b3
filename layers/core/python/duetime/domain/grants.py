"""Handler grants: which owners (or their groups) may use which handler names and targets.

A pattern is a glob over the name (`billing.*`, `lambda:billing-*`), except for URLs: a pattern that starts
with `https://` or `http://` is matched on the parsed URL (scheme, host, port, path), never as a string,
so `https://*.example.com/*` cannot be met by `https://evil.test/.example.com/x`. Only the pattern `*`
(everything) covers a URL otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from duetime.domain.errors import InvalidInput
from duetime.domain.webhooks import WEBHOOK_SCHEMES, WebhookUrl, default_port, split_webhook_url

GROUP_PREFIX = "group:"
EVERYTHING = "*"
# The authority of a URL pattern: a host (a name, `*.` and a name, or an [IPv6] literal) and a port or `*`.
_AUTHORITY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]/?#@*]+|\*\.[^:\[\]/?#@*]+)(?::([0-9]{1,5}|\*))?")


def _is_url(name: str) -> bool:
    return name.lower().startswith(WEBHOOK_SCHEMES)


@dataclass(frozen=True)
class UrlPattern:
    """A grant over webhook URLs: `scheme://HOST[:PORT]/PATH`. HOST is exact, or `*.example.com` for any
    name under example.com (not example.com itself); PORT is exact (the scheme's default when left out) or
    `*`; PATH is exact, or a prefix when it ends with `*` (`/*`: any path). The query counts as path."""

    scheme: str
    host: str  # lower case, IDNA, without a trailing dot or brackets; "*.suffix" for a suffix
    port: int | None  # None: any port
    path: str  # without the trailing `*` when `prefix`
    prefix: bool

    @classmethod
    def parse(cls, pattern: str) -> UrlPattern:
        """Raises ValueError saying what is wrong with `pattern`."""
        scheme, _, rest = pattern.partition("://")
        scheme = scheme.lower()
        authority, slash, path = rest.partition("/")
        matched = _AUTHORITY.fullmatch(authority)
        if matched is None:
            raise ValueError(
                "a URL pattern's host is a name, `*.` and a name, or [an IPv6 address], with an optional :PORT "
                "or :*, and no user info (use the pattern `*` alone to allow every URL)"
            )
        raw_host, raw_port = matched.group(1), matched.group(2)
        wildcard = raw_host.startswith("*.")
        host = raw_host.removeprefix("*.").strip("[]").rstrip(".").lower()
        try:
            host = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise ValueError(f"{raw_host!r} is not a valid host name") from exc
        if not host:
            raise ValueError("a URL pattern names a host")
        path = "/" + path if slash else "/"
        if "*" in path[:-1] or "#" in path:
            raise ValueError("a URL pattern's path may end with `*` (a prefix) and has no other `*` nor #fragment")
        port = None if raw_port == "*" else int(raw_port) if raw_port else default_port(scheme)
        prefix = path.endswith("*")
        return cls(scheme, ("*." if wildcard else "") + host, port, path.removesuffix("*"), prefix)

    def covers(self, url: WebhookUrl) -> bool:
        if url.scheme != self.scheme or (self.port is not None and url.port != self.port):
            return False
        if self.host.startswith("*."):
            if not url.host.endswith(self.host[1:]) or url.literal_ip is not None:
                return False
        elif url.host != self.host:
            return False
        if not self.prefix:
            return url.path == self.path
        # A prefix holds only over a path no receiver could resolve elsewhere: no `.`/`..` segments, nor
        # encoded slashes or backslashes that a server might turn into segments.
        return url.path.startswith(self.path) and (self.path == "/" or not _escapes(url.path))


def _escapes(path: str) -> bool:
    """True if `path` (and query) has a dot segment, a backslash or an encoded slash, dot or backslash."""
    segments = path.split("?", 1)[0].split("/")
    return any(
        "\\" in segment or unquote(segment) in (".", "..") or "/" in unquote(segment) or "\\" in unquote(segment)
        for segment in segments
    )


@lru_cache(maxsize=1024)
def _url_pattern(pattern: str) -> UrlPattern:
    return UrlPattern.parse(pattern)


def handler_matches(pattern: str, handler: str) -> bool:
    """Whether one grant pattern covers `handler`: URL patterns on the parsed URL, others as globs."""
    if pattern == EVERYTHING:
        return True
    if _is_url(pattern) or _is_url(handler):
        if not (_is_url(pattern) and _is_url(handler)):
            return False
        try:
            return _url_pattern(pattern).covers(split_webhook_url(handler))
        except (ValueError, InvalidInput):
            return False
    return fnmatchcase(handler, pattern)


@dataclass(frozen=True)
class GrantRule:
    """Owners matching any of `owners` (a glob over the owner, or "group:NAME" for a member of NAME) may
    use handlers matching any of `handlers` (globs over the full name: "billing.*", "lambda:billing-*")."""

    owners: tuple[str, ...]
    handlers: tuple[str, ...]

    def covers_owner(self, owner: str, groups: Iterable[str]) -> bool:
        member_of = set(groups)
        for pattern in self.owners:
            if pattern.startswith(GROUP_PREFIX):
                if pattern.removeprefix(GROUP_PREFIX) in member_of:
                    return True
            elif fnmatchcase(owner, pattern):
                return True
        return False

    def covers_handler(self, handler: str) -> bool:
        return any(handler_matches(pattern, handler) for pattern in self.handlers)


@dataclass(frozen=True)
class Grants:
    """A list of rules; an owner may use a handler if any rule covers both."""

    rules: tuple[GrantRule, ...]

    def allows(self, owner: str, groups: Iterable[str], handler: str) -> bool:
        member_of = tuple(groups)
        return any(r.covers_handler(handler) and r.covers_owner(owner, member_of) for r in self.rules)

    def denial(self, owner: str, handler: str) -> str:
        """Why `owner` may not use `handler`: the sentence both the API and a refusing worker report."""
        return f"owner {owner!r} is not granted handler {handler!r}"

    @classmethod
    def parse(cls, raw: Any, source: str = "grants") -> Grants:
        """Rules from their JSON form `[{"owners": [...], "handlers": [...]}, ...]` (or {"rules": [...]});
        raises InvalidInput naming `source` and the rule that is malformed."""
        rules_raw = raw.get("rules") if isinstance(raw, dict) else raw
        if not isinstance(rules_raw, list):
            raise InvalidInput(f"{source}: expected a list of rules", field=source)
        rules: list[GrantRule] = []
        for index, rule in enumerate(rules_raw):
            where = f"{source}[{index}]"
            if not isinstance(rule, dict) or set(rule) != {"owners", "handlers"}:
                raise InvalidInput(f"{where}: a rule has exactly 'owners' and 'handlers'", field=source)
            owners, handlers = rule["owners"], rule["handlers"]
            for name, patterns in (("owners", owners), ("handlers", handlers)):
                if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
                    raise InvalidInput(f"{where}.{name}: expected a list of non-empty strings", field=source)
            for pattern in handlers:
                if _is_url(pattern):
                    try:
                        UrlPattern.parse(pattern)
                    except ValueError as exc:
                        raise InvalidInput(f"{where}.handlers: {pattern!r}: {exc}", field=source) from exc
            rules.append(GrantRule(owners=tuple(owners), handlers=tuple(handlers)))
        return cls(rules=tuple(rules))


# Locally, without a grants file, everyone may use everything.
EVERYONE = Grants(rules=(GrantRule(owners=("*",), handlers=("*",)),))
# On AWS, without configured grants, everyone may use the built-in demo handlers and nothing else.
DEMO_ONLY = Grants(rules=(GrantRule(owners=("*",), handlers=("demo.*",)),))
