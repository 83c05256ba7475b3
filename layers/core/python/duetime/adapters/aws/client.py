"""boto3 clients for duetime's adapters, pointed at AWS or at a local moto endpoint."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

# Standard retry mode retries throttling and transient errors with backoff; every write duetime makes
# is conditional or idempotent by key, so a retried call cannot double an effect.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    max_pool_connections=64,
    connect_timeout=5,
    read_timeout=30,
)


# The access key of local calls made as the developer (the CLI, `duetime local` itself): never checked.
LOCAL_DEVELOPER_KEY = "duetime-local"


def make_client(
    service: str,
    region: str,
    endpoint_url: str | None = None,
    config: Config | None = None,
    identity: str | None = None,
) -> Any:
    """A client of `service` with CLIENT_CONFIG, or `config` for a client whose calls differ (target invokes).

    Locally (an `endpoint_url`) `identity` is the access key id of the role the caller runs as, by which the
    local moto server checks each call against that role's policies (duetime.local.iam); without one the
    call is the developer's own, unchecked."""
    kwargs: dict[str, Any] = {"region_name": region, "config": config or CLIENT_CONFIG}
    if endpoint_url:
        # moto accepts any credentials; fixed ones keep a developer's real keys out of local traffic.
        kwargs.update(
            endpoint_url=endpoint_url,
            aws_access_key_id=identity or LOCAL_DEVELOPER_KEY,
            aws_secret_access_key=LOCAL_DEVELOPER_KEY,
        )
    return boto3.client(service, **kwargs)
