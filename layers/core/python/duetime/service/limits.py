"""Rate limits per target and concurrency caps: an owner's named limits, and the gate a run passes between
its due message and its claim (a start reserved in the limit's token bucket, a slot of each cap)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace

from duetime.definitions import LIMIT_LAPSE_MS, MAX_LIMITS_PER_OWNER, SLOT_WAIT_SECONDS
from duetime.domain.errors import Conflict, InvalidInput, NotFound
from duetime.domain.keys import ExecutionKey
from duetime.domain.limits import RateLimit, bucket_key, check_limit_name, job_slots_key, limit_slots_key
from duetime.domain.models import Execution, Job, to_ms
from duetime.service.calendars import live_jobs_where, shown_jobs
from duetime.service.context import Ports
from duetime.service.ports import DueMessage

log = logging.getLogger("duetime.limits")


# -- the owner's named limits ---------------------------------------------------------------------------


def checked_name(name: str) -> str:
    try:
        return check_limit_name(name)
    except ValueError as exc:
        raise NotFound(f"limit {name[:80]!r} not found", field="name") from exc


def list_limits(ports: Ports, owner: str) -> list[RateLimit]:
    """The owner's limits, by name."""
    return sorted(ports.store.get_limits(owner).values(), key=lambda limit: limit.name)


def get_limit(ports: Ports, owner: str, name: str) -> RateLimit:
    limit = ports.store.get_limits(owner).get(checked_name(name))
    if limit is None:
        raise NotFound(f"limit {name!r} not found", field="name")
    return limit


def put_limit(
    ports: Ports, owner: str, name: str, per_second: float, burst: int, max_concurrent: int | None
) -> tuple[RateLimit, bool]:
    """Create or replace a limit (its numbers already validated); True if it is new. Runs already holding a
    reserved start keep it; the next reservation follows the new rate."""
    try:
        check_limit_name(name)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="name") from exc
    existing = ports.store.get_limits(owner)
    if name not in existing and len(existing) >= MAX_LIMITS_PER_OWNER:
        raise Conflict(f"an owner may keep at most {MAX_LIMITS_PER_OWNER} limits", field="name")
    limit = RateLimit(name, per_second, burst, max_concurrent, to_ms(ports.clock()))
    return limit, ports.store.put_limit(owner, limit)


def delete_limit(ports: Ports, owner: str, name: str) -> None:
    """Delete a limit no job (neither cancelled nor completed) names; else 409 naming those jobs."""
    get_limit(ports, owner, name)
    users = [job.job_id for job in jobs_naming(ports, owner, name)]
    if users:
        shown = shown_jobs(users)
        raise Conflict(f"limit {name!r} is the rateLimit of {len(users)} job(s) not ended: {shown}", field="name")
    if not ports.store.delete_limit(owner, name):
        raise NotFound(f"limit {name!r} not found", field="name")


def jobs_naming(ports: Ports, owner: str, name: str) -> Iterator[Job]:
    """The owner's jobs, neither cancelled nor completed, whose rateLimit is `name`."""
    return live_jobs_where(ports, owner, lambda job: job.rate_limit == name)


def check_reference(ports: Ports, owner: str, rate_limit: str | None) -> None:
    """A job's rateLimit names a limit of its owner (one read, only when it names one); InvalidInput
    naming `rateLimit` otherwise."""
    if rate_limit is None:
        return
    if rate_limit not in ports.store.get_limits(owner):
        raise InvalidInput(f"rateLimit names no limit {rate_limit!r} of this owner", field="rateLimit")


# -- the gate between a due message and its claim -----------------------------------------------------


@dataclass(frozen=True)
class Admission:
    """What the gate decided for one run: go (holding `slots`, the slot records to give back when the run
    ends), or wait: `deferred` is the message to send again, visible when the run should look again."""

    slots: tuple[str, ...] = ()
    deferred: DueMessage | None = None
    # Who holds the slots: the execution and this admission (a duplicate message of a running execution
    # must not renew, nor give back, the slot its running attempt holds).
    holder: str = ""


def is_limited(job: Job) -> bool:
    """Whether the job's runs pass the gate at all (a job without either costs nothing more)."""
    return job.rate_limit is not None or job.max_concurrent is not None


def admit(ports: Ports, job: Job, message: DueMessage, until_ms: int) -> Admission:
    """Take a slot of each cap the run is under (the job's maxConcurrent, its limit's), then a start in its
    limit's token bucket unless the message carries one reserved already (and not missed by more than
    LIMIT_LAPSE_MS: a run taken that late reserves again, so a stalled worker cannot start a second's worth of
    missed starts at once). A full cap defers the run by
    SLOT_WAIT_SECONDS; a start reserved in the future defers it until then (holding no slot meanwhile). A
    deferred run keeps when it was first held back, so its claim records the whole wait."""
    now_ms = to_ms(ports.clock())
    limit = _limit_of(ports, job)
    caps: list[tuple[str, int]] = []
    if job.max_concurrent is not None:
        caps.append((job_slots_key(job.job_id), job.max_concurrent))
    if limit is not None and limit.max_concurrent is not None:
        caps.append((limit_slots_key(job.owner, limit.name), limit.max_concurrent))
    since = message.limit_since_ms if message.limit_since_ms is not None else now_ms
    holder = f"{message.execution_id}#{secrets.token_hex(4)}"
    held: list[str] = []
    for key, capacity in caps:
        if not ports.store.acquire_slot(key, holder, capacity, now_ms, until_ms):
            release_slots(ports, tuple(held), holder)
            wait_until = now_ms + round(SLOT_WAIT_SECONDS * 1000)
            return Admission(deferred=replace(message, limit_since_ms=since, not_before_ms=wait_until))
        held.append(key)
    reserved = message.limit_ready_ms
    if reserved is not None and now_ms - reserved > LIMIT_LAPSE_MS:
        reserved = None  # a start missed (a stalled worker) lapses: taken now it would bunch with the next ones
    if limit is not None and reserved is None:
        start = ports.store.reserve_start(bucket_key(job.owner, limit.name), now_ms, limit.interval_ms, limit.burst)
        if start > now_ms:
            release_slots(ports, tuple(held), holder)
            return Admission(deferred=replace(message, limit_since_ms=since, limit_ready_ms=start, not_before_ms=None))
    return Admission(slots=tuple(held), holder=holder)


def _limit_of(ports: Ports, job: Job) -> RateLimit | None:
    if job.rate_limit is None:
        return None
    limit = ports.store.get_limits(job.owner).get(job.rate_limit)
    if limit is None:  # deleted while a run was queued (deletion is refused while a live job names it)
        log.warning("job %s names limit %r, which no longer exists: run unlimited", job.job_id, job.rate_limit)
    return limit


def release_slots(ports: Ports, slots: tuple[str, ...], holder: str) -> None:
    """Give back the slots `holder` took (its run ended, or it did not start)."""
    for key in slots:
        try:
            ports.store.release_slot(key, holder)
        except Exception:  # the hold ends with its lease anyway: never fail a run for it
            log.exception("releasing slot %s of %s failed; it frees when its hold ends", key, holder)


def renew_slots(ports: Ports, slots: tuple[str, ...], holder: str, until_ms: int) -> bool:
    """Extend `holder`'s slots with its lease, so a slot is held exactly as long as the lease is; False if one
    of them is no longer held (it ended with a lease that ended, and another run may have its place now)."""
    renewed = [ports.store.renew_slot(key, holder, until_ms) for key in slots]
    return all(renewed)


def record_wait(ports: Ports, key: ExecutionKey, claimed: Execution, message: DueMessage) -> Execution:
    """Record on the claimed row how long the run was held back (a message that was never deferred: no
    write). Returns the row as it now stands."""
    if message.limit_since_ms is None:
        return claimed
    waited = max(0, to_ms(ports.clock()) - message.limit_since_ms)
    return ports.store.record_limit_wait(key, claimed.attempt, waited, claimed.claim_token)
