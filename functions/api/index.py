"""API Gateway -> the duetime API: parse the event, call one use-case, map the result or error."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.logging import correlation_paths
from duetime.api.app import build_app
from duetime.config import RuntimeConfig, build_ports

logger = Logger(service="duetime-api")
tracer = Tracer(service="duetime-api")
CONFIG = RuntimeConfig.from_env()  # checked at cold start
APP = build_app(build_ports(CONFIG), local_secret=CONFIG.jwt_secret, local_audience=CONFIG.jwt_audience)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
# Responses carry job payloads and results: X-Ray keeps the timing, never the body (issue 14).
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return APP.resolve(event, context)
