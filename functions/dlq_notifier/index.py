"""EventBridge (every minute) -> record what reached each job class's DLQ, tell each owner at its job's
destinations, and the operator's alarm topic one aggregate of what was handled."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from duetime.adapters.aws.client import make_client
from duetime.config import RuntimeConfig, build_ports
from duetime.definitions import NOTICE_WEBHOOK_TIMEOUT_SECONDS
from duetime.domain.destinations import MAX_FAILURE_DESTINATIONS
from duetime.notify import OwnerNotifier, SnsNotifier
from duetime.service.deadletters import drain_dead_letters

logger = Logger(service="duetime-dlq-notifier")
CONFIG = RuntimeConfig.from_env()
PORTS = build_ports(CONFIG)
# The operator's topic hears how many failures were handled and told, never a tenant's failure itself.
OPERATOR = (
    SnsNotifier(
        make_client("sns", CONFIG.region, CONFIG.endpoint_url, identity=CONFIG.local_identity), CONFIG.alert_topic_arn
    )
    if CONFIG.alert_topic_arn
    else None
)
# The longest one dead letter can take: a notice to each of its job's destinations, a webhook given up after its
# timeout, then the row's write and the delete. A drain stops before a message once less than this is left.
NOTICE_AT_MOST_SECONDS = MAX_FAILURE_DESTINATIONS * NOTICE_WEBHOOK_TIMEOUT_SECONDS + 5


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    def time_for_one_more() -> bool:
        return bool(context.get_remaining_time_in_millis() > NOTICE_AT_MOST_SECONDS * 1000)

    handled = {name: drain_dead_letters(PORTS, name, time_for_one_more) for name in PORTS.settings.job_classes}
    told = PORTS.notifier.take_counts() if isinstance(PORTS.notifier, OwnerNotifier) else {}
    # Under one key: a job class named like a LogRecord attribute ("name", "created") must not clash.
    logger.info("dead letters handled", extra={"handled": handled, "told": told})
    total = sum(handled.values())
    if OPERATOR is not None and total:
        OPERATOR.notify("operator", f"duetime: {total} dead letters handled", {"handled": handled, "told": told})
    return handled
