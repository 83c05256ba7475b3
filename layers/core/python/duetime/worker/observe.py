"""What a worker reports about each run: structured logs and metrics (Powertools on AWS, counters locally)."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from typing import Any, Protocol

# Metric names the CDK monitoring construct alarms and graphs on (definitions.py names them for both).
from duetime.definitions import METRIC_DEAD_LETTERED as DEAD_LETTERED
from duetime.definitions import METRIC_FAILED as FAILED
from duetime.definitions import METRIC_NAMESPACE as NAMESPACE
from duetime.definitions import METRIC_RETRIED as RETRIED
from duetime.definitions import METRIC_START_LATENESS_MS as START_LATENESS_MS
from duetime.definitions import METRIC_STARTED as STARTED
from duetime.definitions import METRIC_SUCCEEDED as SUCCEEDED
from duetime.definitions import WORKER_METRICS_SERVICE
from duetime.domain.models import Execution

__all__ = ["DEAD_LETTERED", "FAILED", "RETRIED", "STARTED", "SUCCEEDED", "CountingObserver", "Observer"]


class Observer(Protocol):
    def started(self, execution: Execution, lateness_ms: int) -> None: ...

    def finished(self, execution: Execution, outcome: str, error: str | None = None) -> None: ...


def _fields(execution: Execution) -> dict[str, Any]:
    return {"jobId": execution.job_id, "executionId": execution.execution_id, "attempt": execution.attempt}


class CountingObserver:
    """Counts metrics in memory and logs through `logging` (`duetime local`, tests). It keeps counts only: a
    long-lived worker's memory must not grow with the runs it has made (it once kept every run's lateness in
    a list nobody read)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.log = logging.getLogger("duetime.worker")

    def started(self, execution: Execution, lateness_ms: int) -> None:
        with self._lock:
            self.counts[STARTED] += 1
        self.log.info("started %s", _fields(execution) | {"latenessMs": lateness_ms})

    def finished(self, execution: Execution, outcome: str, error: str | None = None) -> None:
        with self._lock:
            self.counts[outcome] += 1
            if outcome != SUCCEEDED:
                self.counts[FAILED] += 1
        self.log.info("finished %s", _fields(execution) | {"outcome": outcome, "error": error})


class PowertoolsObserver:
    """Powertools Logger (JSON with jobId, executionId, attempt) and Metrics in CloudWatch EMF, one metric
    document per event so a long-running ECS worker needs no flush cycle."""

    def __init__(self, service: str = WORKER_METRICS_SERVICE) -> None:
        from aws_lambda_powertools import Logger

        self.service = service
        self.logger = Logger(service=f"duetime-{service}")

    def _metric(self, name: str, value: float, unit: str) -> None:
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        with single_metric(
            name=name,
            unit=MetricUnit(unit),
            value=value,
            namespace=NAMESPACE,
            default_dimensions={"service": self.service},
        ):
            pass

    def started(self, execution: Execution, lateness_ms: int) -> None:
        self._metric(STARTED, 1, "Count")
        self._metric(START_LATENESS_MS, lateness_ms, "Milliseconds")
        self.logger.info("started", extra=_fields(execution) | {"latenessMs": lateness_ms})

    def finished(self, execution: Execution, outcome: str, error: str | None = None) -> None:
        self._metric(outcome, 1, "Count")
        if outcome != SUCCEEDED:
            self._metric(FAILED, 1, "Count")
        self.logger.info("finished", extra=_fields(execution) | {"outcome": outcome, "error": error})


def default_observer() -> Observer:
    """Powertools where CloudWatch reads stdout (Lambda, ECS), in-memory counters elsewhere."""
    on_aws = "AWS_LAMBDA_FUNCTION_NAME" in os.environ or "ECS_CONTAINER_METADATA_URI_V4" in os.environ
    return PowertoolsObserver() if on_aws else CountingObserver()
