"""The contract suite's fixtures: every test runs once per adapter (DynamoDB+SQS on moto, SQLite on a file)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from duetime.adapters.aws.queue import DueQueues
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.domain.models import Job, JobSpec, to_ms
from duetime.service.context import Ports
from duetime.service.dispatch import sweep
from duetime.service.ports import Queues

from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every test of the contract suite is written once and runs on each adapter."""
    return str(request.param)


@dataclass(frozen=True)
class QueueTiming:
    """Real-clock times for one adapter's queue: SQS counts delays and visibility in whole seconds and sends
    one to two seconds early (sqs.delay_seconds; the worker waits out the rest); SQLite counts milliseconds
    and delivers at the instant."""

    unit: float  # a visibility or delay long enough to observe, in seconds
    early: float  # how much sooner than its due instant a message may be delivered
    late: float  # how much later than its due instant (or visibility end) it must have been delivered


TIMINGS = {
    # early=2: a due time that is not a whole number of seconds away is sent with the whole seconds left after
    # the one to spare, so it surfaces up to two seconds early.
    "moto": QueueTiming(unit=2.0, early=2.0, late=1.6),
    # A second, not tenths: the checks sleep to just short of an instant, and a loaded 2-core machine (CI runs
    # the tiers beside both e2e suites) oversleeps by tens of milliseconds.
    "sqlite": QueueTiming(unit=1.0, early=0.0, late=0.5),
}


@pytest.fixture
def timing(backend: str) -> QueueTiming:
    return TIMINGS[backend]


@pytest.fixture
def queues(ports: Ports, backend: str) -> Queues:
    """The due queues with real delays (the `ports` fixture's send everything at once, for a hand clock)."""
    if backend == "sqlite":
        assert isinstance(ports.queues, SqliteQueues)
        return SqliteQueues(ports.queues.db, ports.settings)
    assert isinstance(ports.queues, DueQueues)
    return DueQueues(ports.queues.client, ports.queues.queue_urls, ports.queues.dlq_urls)


def wall_now() -> datetime:
    return datetime.now(UTC)


def wall_ms() -> int:
    return to_ms(wall_now())


def make_job(
    clock: Callable[[], datetime], job_id: str = "j_0000000000000001", owner: str = "alice", **spec: object
) -> Job:
    now = clock()
    values: dict[str, object] = {"name": "contract", "handler": "demo.echo", "schedule": {"at": now}, **spec}
    base = JobSpec.model_validate(values)
    return Job(**base.model_dump(), job_id=job_id, owner=owner, created_at=now, updated_at=now)


def receive_within(queues: Queues, job_class: str, seconds: float, visibility: float, n: int = 10) -> list:
    """Receive until something arrives or `seconds` pass (short waits, so a slow adapter is not a failure)."""
    deadline = time.monotonic() + seconds
    while True:
        got = queues.receive(job_class, n, min(1.0, max(0.0, deadline - time.monotonic())), visibility)
        if got or time.monotonic() >= deadline:
            return got


def swept(ports: Ports, shard: int, until: datetime) -> int:
    """The pre-loader's sweep of `shard` once `until` is overdue (service.dispatch.sweep): the rows due by then
    that are still open enter the open set (on DynamoDB; on SQLite they are in it from their write)."""
    return sweep(ports, shard, to_ms(until - timedelta(days=1)), to_ms(until))
