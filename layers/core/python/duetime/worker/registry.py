"""Job handlers registered by name (`@handler("team.name")`), and what each receives."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from duetime.domain.errors import InvalidInput


class PermanentFailure(Exception):
    """Raised by a handler to fail its execution for good: no retry, straight to the DLQ."""


@dataclass
class JobContext:
    """What a handler receives. `execution_id` is the idempotency key: the same on every attempt."""

    execution_id: str
    job_id: str
    attempt: int
    scheduled_at: datetime
    payload: dict[str, Any]
    owner: str = ""
    cancelled: threading.Event = field(default_factory=threading.Event)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; returns False early if the run was told to stop (timeout, lost lease)."""
        return not self.cancelled.wait(seconds)


HandlerFn = Callable[[JobContext], Any]
_handlers: dict[str, HandlerFn] = {}
# Handler names with these prefixes are dispatched by kind, not looked up in the registry.
KIND_PREFIXES = ("lambda:", "ecs:", "https://", "http://")


def handler(name: str) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn` under `name`, e.g. `@handler("billing.generate_invoices")`."""

    def register(fn: HandlerFn) -> HandlerFn:
        _handlers[name] = fn
        return fn

    return register


def get_handler(name: str) -> HandlerFn | None:
    _load_builtins()
    return _handlers.get(name)


def is_known(name: str) -> bool:
    return name.startswith(KIND_PREFIXES) or get_handler(name) is not None


def registered_names() -> list[str]:
    _load_builtins()
    return sorted(_handlers)


def load_modules(modules: Iterable[str]) -> None:
    """Import handler modules so their `@handler` decorators register; raises InvalidInput if missing."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise InvalidInput(f"cannot import handler module {module!r}: {exc}", field="handlers") from exc


def _load_builtins() -> None:
    importlib.import_module("duetime.worker.demo")
