"""The data dir of a running `duetime local`: what other commands need to reach it (no moto import)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from duetime.config import RuntimeConfig

STATE_FILE = "local.json"


def read_state(data_dir: str | Path) -> dict[str, Any]:
    """What other commands need to reach a running `duetime local` (written at its start)."""
    path = Path(data_dir) / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is `duetime local --data-dir {data_dir}` running?")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def config_from_state(state: dict[str, Any]) -> RuntimeConfig:
    return RuntimeConfig(
        prefix=state["prefix"],
        region=state["region"],
        endpoint_url=state["endpointUrl"],
        shards=state["shards"],
        preload_interval_seconds=state["preloadIntervalSeconds"],
        preload_window_seconds=state["preloadWindowSeconds"],
        lease_seconds=state["leaseSeconds"],
        jwt_secret=state["jwtSecret"],
        handler_grants=state.get("handlerGrants"),
    )
