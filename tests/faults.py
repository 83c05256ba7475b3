"""Test-only fault injection: botocore event hooks that crash, throttle or replay AWS calls by operation and count.

A crash is a `Crash`, a BaseException, so no `except Exception` in duetime can swallow it: it behaves like
the process dying at that instant. `before` dies before the request leaves; `after` dies once the service
has applied the call but before the caller sees the answer. A throttle answers a request with a 400
throttling error from `before-send`, so the request never reaches the service and botocore's own retry
handler (standard mode) decides to try again. A replay lets a request through, then tells botocore it
needs a retry, as if the response had been lost on the way back: the service sees the call twice.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse

Match = Callable[[dict[str, Any]], bool]

THROTTLE_CODES = {
    "dynamodb": ("com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "ProvisionedThroughput"),
    "sqs": ("com.amazonaws.sqs#ThrottlingException", "Rate exceeded"),
}


class Crash(BaseException):
    """A simulated process death at an AWS call."""


@dataclass
class Rule:
    """Fire `action` on the `nth` .. `nth + times - 1` calls (or sends, for throttles) matching it."""

    service: str
    operation: str
    action: str  # "before", "after", "throttle" or "replay"
    nth: int = 1
    times: int = 1
    match: Match | None = None
    seen: int = 0
    fired: int = 0

    def applies(self, service: str, operation: str, params: dict[str, Any]) -> bool:
        if service != self.service or operation != self.operation:
            return False
        if self.match is not None and not self.match(params):
            return False
        self.seen += 1
        if self.nth <= self.seen < self.nth + self.times:
            self.fired += 1
            return True
        return False


class _Raw:
    """The raw body botocore reads from a response (what urllib3 would give it)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


@dataclass
class Faults:
    """Rules over the clients it is attached to, with a count of every call and every fault fired."""

    rules: list[Rule] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    fired: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    # -- rules -----------------------------------------------------------------------------------

    def crash_before(self, service: str, operation: str, nth: int = 1, match: Match | None = None) -> Rule:
        return self._add(Rule(service, operation, "before", nth, 1, match))

    def crash_after(self, service: str, operation: str, nth: int = 1, match: Match | None = None) -> Rule:
        return self._add(Rule(service, operation, "after", nth, 1, match))

    def throttle(self, service: str, operation: str, times: int = 2, nth: int = 1, match: Match | None = None) -> Rule:
        return self._add(Rule(service, operation, "throttle", nth, times, match))

    def replay(self, service: str, operation: str, nth: int = 1, match: Match | None = None) -> Rule:
        return self._add(Rule(service, operation, "replay", nth, 1, match))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    # -- hooks -------------------------------------------------------------------------------------

    def attach(self, *clients: Any) -> Faults:
        """Hook every call of each client (register_first: before moto's own `before-send` stub)."""
        for client in clients:
            service = client.meta.service_model.service_id.hyphenize()
            uid = f"duetime-faults-{id(self)}-{next(self._ids)}"
            events = client.meta.events
            events.register_first(f"provide-client-params.{service}", self._on_params, unique_id=f"{uid}-p")
            events.register_first(f"before-send.{service}", self._on_send, unique_id=f"{uid}-s")
            events.register_first(f"needs-retry.{service}", self._on_needs_retry, unique_id=f"{uid}-r")
            events.register_first(f"after-call.{service}", self._on_after_call, unique_id=f"{uid}-a")
        return self

    def attach_ports(self, ports: Any) -> Faults:
        clients = {id(c): c for c in (ports.store.client, ports.queues.client)}
        return self.attach(*clients.values())

    def _decide(self, service: str, operation: str, params: dict[str, Any], actions: tuple[str, ...]) -> list[str]:
        with self._lock:
            hits = [r.action for r in self.rules if r.action in actions and r.applies(service, operation, params)]
            self.fired.extend(f"{a}:{operation}" for a in hits)
        return hits

    def _on_params(self, params: dict[str, Any], context: dict[str, Any], event_name: str, **_: Any) -> None:
        _, service, operation = event_name.split(".", 2)
        with self._lock:
            self.calls[operation] += 1
        hits = self._decide(service, operation, params, ("before", "after", "replay"))
        if "before" in hits:
            raise Crash(f"crash before {operation}")
        context["duetime_faults"] = hits

    def _on_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        _, service, operation = event_name.split(".", 2)
        try:
            params = json.loads(request.body or b"{}")
        except (TypeError, ValueError):
            params = {}
        if not self._decide(service, operation, params, ("throttle",)):
            return None
        error_type, message = THROTTLE_CODES[service]
        body = json.dumps({"__type": error_type, "message": message}).encode()
        headers = {"x-amzn-RequestId": "duetime-faults", "Content-Type": "application/x-amz-json-1.0"}
        # botocore asks every before-send handler (moto's in-process stub too) and takes the first answer;
        # an address no stub serves keeps the throttled request from reaching the service at all.
        request.url = "http://duetime-faults.invalid/"
        return AWSResponse(request.url, 400, headers, _Raw(body))

    def _on_needs_retry(self, request_dict: dict[str, Any], attempts: int, response: Any, **_: Any) -> float | None:
        hits = request_dict.get("context", {}).get("duetime_faults", [])
        ok = response is not None and response[0].status_code < 300
        if "replay" in hits and attempts == 1 and ok:
            return 0.0  # the answer is "lost": botocore sends the same request again
        return None

    def _on_after_call(self, context: dict[str, Any], event_name: str, **_: Any) -> None:
        if "after" in context.get("duetime_faults", []):
            raise Crash(f"crash after {event_name.split('.', 2)[2]}")


def table(name_part: str) -> Match:
    """Match a DynamoDB call on a table whose name contains `name_part` (e.g. "control", "executions")."""
    return lambda params: name_part in str(params.get("TableName", ""))


def during(port_method: str) -> Match:
    """Match an AWS call made while a store's port method `port_method` (e.g. "claim", "heartbeat", "finish",
    "advance_cursor") runs: faults name what the call is for by the port's contract, not by the text of
    the expression the adapter happens to send."""

    def match(_: dict[str, Any]) -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            owner = frame.f_locals.get("self") if frame.f_code.co_name == port_method else None
            if owner is not None and type(owner).__name__.endswith("Store"):
                return True
            frame = frame.f_back
        return False

    return match


class FaultyPort:
    """A port (the store or the queues) whose method calls go through `Faults` rules, with the port's name as
    the service and the method's name as the operation: the crashes of `attach` for adapters that make no
    AWS calls (SQLite). `before` dies before the method runs; `after` once it has returned."""

    def __init__(self, inner: Any, name: str, faults: Faults) -> None:
        self._inner, self._name, self._faults = inner, name, faults

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if attr.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._faults._lock:
                self._faults.calls[attr] += 1
            hits = self._faults._decide(self._name, attr, {}, ("before", "after"))
            if "before" in hits:
                raise Crash(f"crash before {self._name}.{attr}")
            result = value(*args, **kwargs)
            if "after" in hits:
                raise Crash(f"crash after {self._name}.{attr}")
            return result

        return call


def wrap_ports(faults: Faults, ports: Any) -> Any:
    """A copy of `ports` whose store and queues crash by `faults`' rules on "store"/"queues" method calls."""
    return dataclasses.replace(
        ports, store=FaultyPort(ports.store, "store", faults), queues=FaultyPort(ports.queues, "queues", faults)
    )
