"""Named rate limits and concurrency caps: their records, the token bucket's arithmetic and slot bookkeeping."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# A limit's name, as its URL path segment and a job's `rateLimit` spell it.
LIMIT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
LIMIT_NAME_RULE = "1-64 of a-z, 0-9, '-' and '_', starting with a letter or digit"
# One control record holds all of an owner's limits, one `limit:<name>` attribute each (as calendars).
LIMIT_ATTR_PREFIX = "limit:"
# A slot record's holders: one `holder:<executionId>#<admission>` attribute each, valued with when the hold ends.
HOLDER_ATTR_PREFIX = "holder:"
# The token bucket's state attribute: the theoretical arrival time of the next start (GCRA), epoch ms.
NEXT_START_ATTR = "nextStartMs"


@dataclass(frozen=True)
class RateLimit:
    """An owner's named limit: `per_second` starts a second with `burst` more at once after a quiet spell,
    and (when set) at most `max_concurrent` runs of all the jobs naming it at once."""

    name: str
    per_second: float
    burst: int
    max_concurrent: int | None
    updated_ms: int

    @property
    def interval_ms(self) -> float:
        """The steady spacing of starts."""
        return 1000.0 / self.per_second


def check_limit_name(name: str) -> str:
    """The name if it is a valid limit name; ValueError otherwise."""
    if not LIMIT_NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a limit name ({LIMIT_NAME_RULE})")
    return name


def limits_key(owner: str) -> str:
    """The control record holding all of an owner's named limits."""
    return f"limits#{owner}"


def bucket_key(owner: str, name: str) -> str:
    """The control record of an owner's limit's token bucket (one row per limit, its state one number)."""
    return f"limitbucket#{owner}#{name}"


def limit_slots_key(owner: str, name: str) -> str:
    """The slot record of an owner's limit's maxConcurrent."""
    return f"limitslots#{owner}#{name}"


def job_slots_key(job_id: str) -> str:
    """The slot record of a job's maxConcurrent."""
    return f"jobslots#{job_id}"


def limit_entry(limit: RateLimit) -> dict[str, Any]:
    """A limit as its attribute in the owner's limits record (both adapters store this shape). The rate is
    kept in thousandths: DynamoDB numbers come back as Decimals, control records keep whole numbers."""
    return {
        "perSecondMilli": round(limit.per_second * 1000),
        "burst": limit.burst,
        "maxConcurrent": limit.max_concurrent,
        "updatedMs": limit.updated_ms,
    }


def limits_from_record(record: dict[str, Any]) -> dict[str, RateLimit]:
    """The limits of an owner's limits record, by name."""
    limits: dict[str, RateLimit] = {}
    for attr, entry in record.items():
        if not attr.startswith(LIMIT_ATTR_PREFIX):
            continue
        name = attr.removeprefix(LIMIT_ATTR_PREFIX)
        cap = entry.get("maxConcurrent")
        limits[name] = RateLimit(
            name=name,
            per_second=int(entry["perSecondMilli"]) / 1000,
            burst=int(entry["burst"]),
            max_concurrent=None if cap is None else int(cap),
            updated_ms=int(entry["updatedMs"]),
        )
    return limits


def start_step_ms(interval_ms: float) -> int:
    """The bucket's spacing of starts in whole milliseconds (rounded up: never faster than the limit)."""
    return max(1, math.ceil(interval_ms))


def reserve_start(next_start_ms: int | None, now_ms: int, interval_ms: float, burst: int) -> tuple[int, int]:
    """Reserve one start in a token bucket kept as GCRA (the theoretical arrival time of the next start):
    returns (the instant the reserved start may run, the bucket's new state).

    An idle bucket lets `burst + 1` starts run at once; after that one every `interval_ms`. Every caller is
    given a start (later ones further out), so callers never race for the same freed token: a run told to
    wait is counted once, at its reserved instant. Over any window of one second at most
    per_second + burst reserved starts fall (the n-th after the first is at least (n - 1 - burst) steps
    later)."""
    step = start_step_ms(interval_ms)
    tat = now_ms if next_start_ms is None else max(next_start_ms, now_ms)
    return max(now_ms, tat - burst * step), tat + step


def live_holders(record: dict[str, Any], now_ms: int) -> dict[str, int]:
    """The holders of a slot record whose hold has not ended at `now_ms`, with when each ends."""
    return {
        attr: int(until)
        for attr, until in record.items()
        if attr.startswith(HOLDER_ATTR_PREFIX) and int(until) > now_ms
    }


def holder_attr(holder: str) -> str:
    return HOLDER_ATTR_PREFIX + holder


# A bucket or slot record not written for this long is forgotten (TTL): an idle bucket is full again and
# every hold it recorded has ended.
CONTROL_IDLE_SECONDS = 3600
