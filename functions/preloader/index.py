"""EventBridge (every minute) -> one pre-load cycle over every shard this invocation can lease."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import (
    METRIC_DISPATCHED,
    METRIC_NAMESPACE,
    METRIC_SHARD_ERRORS,
    METRIC_SHARDS_BUSY,
    METRIC_SKIPPED,
    PRELOADER_METRICS_SERVICE,
)
from duetime.service.dispatch import preload

logger = Logger(service="duetime-preloader")
tracer = Tracer(service="duetime-preloader")
metrics = Metrics(namespace=METRIC_NAMESPACE, service=PRELOADER_METRICS_SERVICE)
CONFIG = RuntimeConfig.from_env()  # checked at cold start: a window the interval cannot serve is refused
PORTS = build_ports(CONFIG)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Each invocation leases the shards afresh under its own request id and hands every lease back at
    the end of its cycle, so the next minute's invocation pre-loads every shard again. A rule per shard
    group (`{"shardGroup": g, "shardGroups": n}`) fans a cycle out over n invocations."""
    cycle = preload(
        PORTS,
        owner=context.aws_request_id,
        threads=CONFIG.preload_threads,
        dispatch_threads=CONFIG.preload_dispatch_threads,
        group=int(event.get("shardGroup", 0)),
        groups=int(event.get("shardGroups", 1)),
    )
    report = asdict(cycle)
    metrics.add_metric(name=METRIC_DISPATCHED, unit=MetricUnit.Count, value=report["sent"])
    metrics.add_metric(name=METRIC_SKIPPED, unit=MetricUnit.Count, value=report["skipped"])
    metrics.add_metric(name=METRIC_SHARDS_BUSY, unit=MetricUnit.Count, value=report["busy"])
    metrics.add_metric(name=METRIC_SHARD_ERRORS, unit=MetricUnit.Count, value=report["errors"])
    # Under one key: the report's own names ("created") would clash with LogRecord attributes.
    logger.info("pre-load cycle", extra={"cycle": report})
    return report
