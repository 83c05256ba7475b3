"""The local worker's observer: counts, and nothing that grows with every run."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from duetime.domain.models import Execution
from duetime.worker.observe import FAILED, STARTED, SUCCEEDED, CountingObserver


def an_execution() -> Execution:
    moment = datetime(2027, 1, 4, 9, tzinfo=UTC)
    return Execution.model_validate(
        {
            "executionId": "ex-1",
            "jobId": "job-1",
            "owner": "alice",
            "handler": "demo.echo",
            "dueAt": moment,
            "scheduledAt": moment,
            "status": "running",
            "attempt": 1,
        }
    )


def footprint(observer: CountingObserver) -> int:
    """The bytes of the observer's own attributes (not what they share with others)."""
    return sys.getsizeof(vars(observer)) + sum(sys.getsizeof(v) for v in vars(observer).values())


def test_a_long_lived_worker_s_observer_counts_runs_without_keeping_them():
    observer = CountingObserver()
    execution = an_execution()
    observer.started(execution, 3)
    observer.finished(execution, SUCCEEDED)
    size = footprint(observer)
    for lateness in range(10_000):
        observer.started(execution, lateness)
        observer.finished(execution, "failed" if lateness % 2 else SUCCEEDED)
    assert observer.counts[STARTED] == 10_001
    assert observer.counts[FAILED] == 5_000
    assert footprint(observer) == size
