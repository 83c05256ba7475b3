"""Which handler a job may name: one its class's workers serve, granted to its owner; workers announce."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from duetime.definitions import BUILTIN_HANDLERS, HANDLER_ANNOUNCE_TTL_SECONDS, HANDLER_KIND_PREFIXES
from duetime.domain.errors import Forbidden, InvalidInput
from duetime.domain.models import to_ms
from duetime.service.context import Ports


def is_kind_name(handler: str) -> bool:
    """A `lambda:`, `ecs:` or webhook target: no worker announces these; grants alone bound them."""
    return handler.startswith(HANDLER_KIND_PREFIXES)


def served_handlers(ports: Ports, job_class: str) -> set[str]:
    """The Python handlers `job_class`'s workers serve: the built-ins, the deployment's manifest (AWS)
    and whatever live workers announced (`duetime local`, `duetime worker`, the Lambda worker)."""
    announced = ports.store.announced_handlers(job_class, to_ms(ports.clock()))
    return set(BUILTIN_HANDLERS) | set(ports.handler_manifest.get(job_class, ())) | announced


def check_grant(ports: Ports, owner: str, groups: Iterable[str], handler: str) -> None:
    """Raises Forbidden (field `handler`) unless the owner, or one of the caller's current `groups`, is
    granted `handler`: at create, and at every edit, run now and backfill, so a revoked group stops
    being used from the next request on."""
    if not ports.grants.allows(owner, tuple(groups), handler):
        raise Forbidden(ports.grants.denial(owner, handler), field="handler")


def check_handler(ports: Ports, owner: str, groups: Iterable[str], handler: str, job_class: str) -> None:
    """Raises Forbidden (field `handler`) if the owner is not granted `handler`, and InvalidInput listing
    what is served if `handler` is a Python name no worker of `job_class` serves."""
    member_of = tuple(groups)
    check_grant(ports, owner, member_of, handler)
    if is_kind_name(handler) or handler in BUILTIN_HANDLERS or handler in ports.handler_manifest.get(job_class, ()):
        return  # known without reading announcements: no extra call on the common path
    served = served_handlers(ports, job_class)
    if handler not in served:
        usable = sorted(name for name in served if ports.grants.allows(owner, member_of, name))
        raise InvalidInput(
            f"handler {handler!r} is not served by any worker of jobClass {job_class!r} "
            f"(served: {', '.join(usable)}; or a 'lambda:', 'ecs:' or 'https://' target)",
            field="handler",
        )


def announce_handlers(ports: Ports, job_class: str, worker_id: str, names: Iterable[str]) -> None:
    """`worker_id` serves `names` for `job_class` for the next HANDLER_ANNOUNCE_TTL_SECONDS."""
    now = ports.clock()
    until = now + timedelta(seconds=HANDLER_ANNOUNCE_TTL_SECONDS)
    python_names = sorted({n for n in names if not is_kind_name(n)})
    ports.store.announce_handlers(job_class, worker_id, python_names, to_ms(now), to_ms(until))


def withdraw_handlers(ports: Ports, job_class: str, worker_id: str) -> None:
    """`worker_id` no longer serves `job_class` (it stops)."""
    ports.store.withdraw_handlers(job_class, worker_id)
