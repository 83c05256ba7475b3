"""The ports every use-case works through, wired once per process (cold start, `duetime local`, tests)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from duetime.definitions import Settings
from duetime.domain.events import Event
from duetime.domain.grants import EVERYONE, Grants
from duetime.domain.history import within_reach
from duetime.domain.keys import time_ordered_hex
from duetime.domain.models import Job
from duetime.domain.quotas import UNLIMITED, Quotas
from duetime.service.ports import Queues, Store


class Notifier(Protocol):
    """Tells a job's owner that an execution failed for good."""

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None: ...


class EventSink(Protocol):
    """Where duetime's events go (EventBridge on AWS, the console and a webhook locally). `publish` never
    raises for a rejected event: events are told, they never fail what they tell of."""

    def publish(self, events: Sequence[Event]) -> None: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Ports:
    """Adapters plus the injected clock, ids and randomness, so use-cases stay deterministic in tests."""

    store: Store  # one object serving the job, execution and control stores
    queues: Queues
    settings: Settings
    notifier: Notifier
    clock: Callable[[], datetime] = utc_now
    id_hex: Callable[[], str] = time_ordered_hex  # a new job id's digits (domain.keys says why time-ordered)
    uniform: Callable[[float, float], float] = random.uniform
    # Who may use which handler (checked at POST /jobs and again at claim), and, on AWS, the Python
    # handlers each job class's workers were built with ({jobClass: names}, computed at synth).
    grants: Grants = EVERYONE
    handler_manifest: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Each owner's limits (HTTP 429 past them): the deployed API and `duetime local` set DEFAULT_QUOTAS or
    # what they are configured with; ports wired by hand (tests, benchmarks) have none.
    quotas: Quotas = UNLIMITED
    # Where terminal runs and job changes are published (None: nowhere, and no call is made).
    events: EventSink | None = None
    # Counts one run of an owner under a metric name (service/lateness.py: in time or late), given the
    # bounded `Owner` value; EMF on AWS (event_sinks.emf_owner_count), None elsewhere: nothing emitted.
    owner_metric: Callable[[str, str], None] | None = None

    def by_slot(self, job: Job, slot: datetime, now: datetime) -> bool:
        """Whether the plain run of `job` in `slot`, planned at `now`, may go without a byJob entry on a store
        keyed by due time (domain.history.within_reach)."""
        return within_reach(job, slot, now, timedelta(seconds=self.settings.preload_window_seconds))

    def dispatch_horizon(self, now: datetime) -> datetime:
        """Executions due before this instant may already be past the pre-loader's cursor, so whoever
        creates or moves one sends it at once. The slack covers clock skew and the pre-loader's own run."""
        return now + timedelta(seconds=self.settings.preload_window_seconds + 5)
