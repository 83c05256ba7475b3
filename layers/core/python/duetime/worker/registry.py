"""Job handlers registered by name (`@handler("team.name")`), and what each receives."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Iterable

from duetime.definitions import HANDLER_KIND_PREFIXES
from duetime.domain.errors import InvalidInput
from duetime.worker.handler_api import (
    HandlerFn,
    JobContext,
    PermanentFailure,
    RegisteredHandler,
    handler,
    registered_handlers,
)

# The handler API is defined in duetime.worker.handler_api (which the built-in handlers import, so this
# module can load them without a circle) and is imported from here, as it always was.
__all__ = [
    "HandlerFn",
    "JobContext",
    "PermanentFailure",
    "RegisteredHandler",
    "failure_of",
    "get_handler",
    "get_registered",
    "handler",
    "load_modules",
    "not_served",
    "registered_names",
]


def get_registered(name: str) -> RegisteredHandler | None:
    _load_builtins()
    return registered_handlers.get(name)


def get_handler(name: str) -> HandlerFn | None:
    registered = get_registered(name)
    return registered.fn if registered else None


def registered_names() -> list[str]:
    """The Python handlers this process serves (what its workers announce), built-ins included."""
    _load_builtins()
    return sorted(name for name in registered_handlers if not name.startswith(HANDLER_KIND_PREFIXES))


def not_served(name: str) -> str:
    """The reason a run ends when its worker cannot resolve its handler (a module no longer loaded)."""
    return f"handler {name!r} is not served by this worker"


def failure_of(exc: BaseException) -> tuple[str, bool]:
    """A handler's exception as (error text, retryable): PermanentFailure is not retried."""
    if isinstance(exc, PermanentFailure):
        return f"PermanentFailure: {exc}", False
    return "".join(traceback.format_exception_only(type(exc), exc)).strip(), True


def load_modules(modules: Iterable[str]) -> None:
    """Import handler modules so their `@handler` decorators register; raises InvalidInput if missing."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise InvalidInput(f"cannot import handler module {module!r}: {exc}", field="handlers") from exc


def _load_builtins() -> None:
    importlib.import_module("duetime.worker.demo")
