"""EventBridge (every minute) -> one pre-load cycle over every shard this invocation can lease."""

from __future__ import annotations

import uuid
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from duetime.config import RuntimeConfig, build_ports
from duetime.service.dispatch import preload

logger = Logger(service="duetime-preloader")
tracer = Tracer(service="duetime-preloader")
metrics = Metrics(namespace="duetime", service="preloader")
PORTS = build_ports(RuntimeConfig.from_env())
# The shard leases' owner: this instance, not one invocation, so the next tick renews its leases instead of
# waiting them out (a request id as owner pre-loaded one minute in three).
OWNER = f"preloader-{uuid.uuid4()}"


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    report = preload(PORTS, owner=OWNER)
    metrics.add_metric(name="Dispatched", unit=MetricUnit.Count, value=report.sent)
    metrics.add_metric(name="Skipped", unit=MetricUnit.Count, value=report.skipped)
    # Under a key of its own: `created` is a LogRecord attribute that `extra` may not overwrite.
    logger.info("pre-load cycle", extra={"report": vars(report)})
    return vars(report)
