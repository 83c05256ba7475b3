"""Per-owner quotas: how many jobs an owner may hold, and how fast it may create jobs and ask for runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.domain.errors import QuotaExceeded
from duetime.domain.models import to_ms

# The names a 429 reports (its error's `field`), as the settings, CDK context keys and flags spell them.
ACTIVE_JOBS = "activeJobs"
JOB_CREATES_PER_MINUTE = "jobCreatesPerMinute"
RUN_NOWS_PER_MINUTE = "runNowsPerMinute"
BACKFILL_SLOTS_PER_HOUR = "backfillSlotsPerHour"
RATE_WINDOW_SECONDS = 60
HOUR_WINDOW_SECONDS = 3600
# Counter records join the owner and the quota's name with "#", which no owner name may contain.
QUOTA_PREFIX = "quota#"
# The counter attribute of a quota record, in both stores.
COUNT_ATTR = "count"
# An owner at its active-jobs quota gets room only by deleting jobs; this is when to look again.
ACTIVE_JOBS_RETRY_AFTER_SECONDS = 60


@dataclass(frozen=True)
class Quotas:
    """Each owner's limits; None leaves that one unlimited.

    `max_active_jobs` counts jobs neither cancelled nor completed (active or paused, a one-off that has run
    included until it is deleted); the two rates count requests accepted per fixed minute window, and
    `backfill_slots_per_hour` the runs backfills create per fixed hour.
    """

    max_active_jobs: int | None = None
    job_creates_per_minute: int | None = None
    run_nows_per_minute: int | None = None
    backfill_slots_per_hour: int | None = None


UNLIMITED = Quotas()


@dataclass(frozen=True)
class RateWindow:
    """The counter of one owner's rate in one fixed window: its record key, its limit, when it ends."""

    key: str
    quota: str
    limit: int
    ends_at_s: int  # epoch seconds: the counter is forgotten after this (the store's TTL), the next one starts
    retry_after: int  # whole seconds from the request until the next window opens (at least 1)
    amount: int = 1  # what this request counts: 1, or the slots of a backfill
    seconds: int = RATE_WINDOW_SECONDS

    @property
    def counter_limit(self) -> int:
        """The count at or above which the stores refuse to add `amount`: the window then could not take it
        whole (`limit - amount + 1`; at most 0 when `amount` alone is above the limit, always refused)."""
        return self.limit - self.amount + 1


def active_jobs_key(owner: str) -> str:
    """The record counting the owner's jobs that are not cancelled."""
    return f"{QUOTA_PREFIX}{owner}#{ACTIVE_JOBS}"


def rate_window(
    owner: str, quota: str, limit: int, now: datetime, amount: int = 1, seconds: int = RATE_WINDOW_SECONDS
) -> RateWindow:
    """The owner's fixed window of `quota` that `now` falls in (windows of `seconds` start on the minute or
    the hour), for a request that counts `amount`."""
    now_s = to_ms(now) // 1000
    start_s = now_s // seconds * seconds
    ends_at_s = start_s + seconds
    return RateWindow(
        key=f"{QUOTA_PREFIX}{owner}#{quota}#{start_s}",
        quota=quota,
        limit=limit,
        ends_at_s=ends_at_s,
        retry_after=max(1, ends_at_s - now_s),
        amount=amount,
        seconds=seconds,
    )


def active_jobs_exceeded(limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"the owner holds {limit} jobs, its quota of {ACTIVE_JOBS}: delete jobs it no longer needs",
        field=ACTIVE_JOBS,
        retry_after=ACTIVE_JOBS_RETRY_AFTER_SECONDS,
    )


def rate_exceeded(window: RateWindow) -> QuotaExceeded:
    period = "hour" if window.seconds == HOUR_WINDOW_SECONDS else "minute"
    if window.amount > 1:
        message = f"{window.amount} more would pass the owner's {window.quota} of {window.limit} this {period}"
    else:
        message = f"the owner made {window.limit} such requests this {period}, its quota of {window.quota}"
    return QuotaExceeded(message, field=window.quota, retry_after=window.retry_after)
