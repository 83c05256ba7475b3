"""Shared fixtures: the service over in-process moto with a controllable clock, and `duetime local`."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

from duetime.adapters.sqlite.db import Database  # noqa: E402
from duetime.adapters.sqlite.queue import SqliteQueues  # noqa: E402
from duetime.adapters.sqlite.store import SqliteStore  # noqa: E402
from duetime.definitions import LOCAL_SETTINGS, Settings  # noqa: E402
from duetime.local.backends import DEFAULT_BACKEND  # noqa: E402
from duetime.local.system import LocalSystem  # noqa: E402
from duetime.notify import ConsoleNotifier  # noqa: E402
from duetime.queue.provision import create_queues  # noqa: E402
from duetime.queue.sqs import DueQueues  # noqa: E402
from duetime.service.context import Ports  # noqa: E402
from duetime.store.aws import make_client  # noqa: E402
from duetime.store.dynamo import DynamoStore  # noqa: E402
from duetime.store.provision import create_tables  # noqa: E402

# The backend `duetime local` runs the e2e suite on (`make test` runs the suite once per backend).
E2E_BACKEND = os.environ.get("DUETIME_E2E_BACKEND", DEFAULT_BACKEND)


def new_local_system(data_dir: str | Path, **options: Any) -> LocalSystem:
    """A `duetime local` on the e2e backend (not started)."""
    return LocalSystem(data_dir, backend=E2E_BACKEND, **options)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `observe_last` watch something that takes minutes of wall time (a cron job running
    on consecutive minutes): run them last, so the time they wait overlaps the rest of the suite."""
    items.sort(key=lambda item: item.get_closest_marker("observe_last") is not None)


@dataclass
class Clock:
    """A clock tests move by hand."""

    now: datetime = field(default_factory=lambda: datetime(2026, 12, 1, 9, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def test_settings() -> Settings:
    return Settings(shards=4, preload_interval_seconds=5, preload_window_seconds=30).with_lease_seconds(30)


# Tests that hold for every adapter mark themselves `pytestmark = BOTH_BACKENDS` and run once per backend;
# the rest (AWS call counts, botocore fault hooks) keep the `moto` default.
BACKENDS = ("moto", "sqlite")
BOTH_BACKENDS = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "moto"))


@pytest.fixture
def ports(clock: Clock, test_settings: Settings, backend: str, tmp_path: Path) -> Iterator[Ports]:
    """The real adapters with an injected clock, ids and jitter: DynamoDB and SQS against in-process moto
    (mock_aws), or SQLite on a file under tmp_path (`backend`)."""
    counter = itertools.count(1)
    injected: dict[str, Any] = {
        "settings": test_settings,
        "notifier": ConsoleNotifier(),
        "clock": clock,
        "random_hex": lambda: f"{next(counter):016x}",
        "uniform": lambda lo, hi: hi,  # the longest backoff: deterministic
    }
    if backend == "sqlite":
        db = Database(tmp_path / "duetime.sqlite3")
        try:
            # max_delay_seconds=0: the queue runs on the real clock, the tests on a hand clock.
            yield Ports(store=SqliteStore(db, test_settings), queues=SqliteQueues(db, test_settings, 0), **injected)
        finally:
            db.close()
        return
    from moto import mock_aws

    with mock_aws():
        dynamodb = make_client("dynamodb", "us-east-1")
        sqs = make_client("sqs", "us-east-1")
        create_tables(dynamodb, test_settings)
        create_queues(sqs, test_settings)
        yield Ports(
            store=DynamoStore(dynamodb, test_settings),
            queues=DueQueues.resolve(sqs, test_settings, max_delay_seconds=0),
            **injected,
        )


class Api:
    """A tiny HTTP client for the local API, with one owner's bearer token."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.base_url + path, timeout=30, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)


@pytest.fixture(scope="session", name="local_system")
def session_local_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """One `duetime local` for the session on the e2e backend (DUETIME_E2E_BACKEND, default sqlite; moto runs
    the real handlers in the Lambda emulation), over real HTTP, with a 6-second lease so lease expiry is
    quick to observe."""
    data_dir = tmp_path_factory.mktemp("duetime-local")
    system = new_local_system(data_dir, port=0, workers=4, lease_seconds=6, shards=4).start()
    yield system
    system.stop()


@pytest.fixture(scope="session")
def api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("alice"))


@pytest.fixture(scope="session")
def other_api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("bob"))


@pytest.fixture(scope="session")
def worker_api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("worker", worker=True))


__all__ = ["BACKENDS", "BOTH_BACKENDS", "E2E_BACKEND", "LOCAL_SETTINGS", "Api", "Clock"]
