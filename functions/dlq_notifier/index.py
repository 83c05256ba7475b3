"""EventBridge (every minute) -> record what reached each job class's DLQ and tell the owners."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from duetime.config import RuntimeConfig, build_ports
from duetime.service.deadletters import drain_dead_letters

logger = Logger(service="duetime-dlq-notifier")
PORTS = build_ports(RuntimeConfig.from_env())


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    handled = {name: drain_dead_letters(PORTS, name) for name in PORTS.settings.job_classes}
    # Under one key: a job class named like a LogRecord attribute ("name", "created") must not clash.
    logger.info("dead letters handled", extra={"handled": handled})
    return handled
