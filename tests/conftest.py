"""Shared fixtures: the ports (DynamoDB and SQS on in-process moto, or SQLite) with a clock tests move by hand.

End-to-end fixtures (`duetime local`, HTTP callers) live in tests/e2e/conftest.py: a unit or contract run
imports neither moto nor werkzeug (tests/unit/test_import_cost.py checks it)."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

from duetime.adapters.aws.client import CLIENT_CONFIG  # noqa: E402
from duetime.adapters.aws.provision import create_queues, create_tables  # noqa: E402
from duetime.adapters.aws.queue import DueQueues  # noqa: E402
from duetime.adapters.aws.store import DynamoStore  # noqa: E402
from duetime.adapters.sqlite.db import Database  # noqa: E402
from duetime.adapters.sqlite.queue import SqliteQueues  # noqa: E402
from duetime.adapters.sqlite.store import SqliteStore  # noqa: E402
from duetime.definitions import Settings  # noqa: E402
from duetime.notify import ConsoleNotifier  # noqa: E402
from duetime.service.context import Ports  # noqa: E402

from tests.moto_keys import reuse_kms_key_material  # noqa: E402


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
        "id_hex": lambda: f"{next(counter):016x}",
        "uniform": lambda lo, hi: hi,  # the longest backoff: deterministic
    }
    if backend == "sqlite":
        db = Database(tmp_path / "duetime.sqlite3")
        # The store's TTL follows the hand clock too: on the real clock (the adapter's default, as DynamoDB's
        # TTL runs) a record the tests give a TTL from the hand clock expires once the wall clock passes it,
        # and the clock above is a fixed date (the quota tests failed from 2026-12-01 09:01 on).
        store = SqliteStore(db, test_settings, epoch_seconds=lambda: int(clock().timestamp()))
        try:
            # max_delay_seconds=0: the queue runs on the real clock, the tests on a hand clock.
            yield Ports(store=store, queues=SqliteQueues(db, test_settings, 0), **injected)
        finally:
            db.close()
        return
    from duetime.local import moto_speed
    from moto import mock_aws

    serialise_moto()
    reuse_kms_key_material()
    moto_speed.install()
    with mock_aws():
        dynamodb = _moto_client("dynamodb")
        sqs = _moto_client("sqs")
        create_tables(dynamodb, test_settings)
        create_queues(sqs, test_settings)
        yield Ports(
            # A new row's write is judged by the hand clock (DynamoTables._indexed_at_create), as the SQLite TTLs are.
            store=DynamoStore(dynamodb, test_settings, epoch_seconds=lambda: clock().timestamp()),
            queues=DueQueues.resolve(sqs, test_settings, max_delay_seconds=0),
            **injected,
        )


_MOTO_LOCK = threading.Lock()
# The requests of the services whose in-process moto backends a test's threads call at once: one at a time.
_SERIALISED = tuple(f"before-send.{service}." for service in ("dynamodb", "ecs"))
_BOTO_SESSIONS: list[Any] = []


def _moto_client(service: str) -> Any:
    """A client as duetime.adapters.aws.client.make_client makes it, from one boto3 session kept for the process:
    mock_aws drops boto3's default session at each start, so every test's clients read botocore's JSON models again
    (0.15 s a test, about two minutes of CPU over the tiers); a kept session's loader reads them once. Each test
    still gets clients of its own (the event hooks a test registers on one stay with it)."""
    import boto3

    if not _BOTO_SESSIONS:
        _BOTO_SESSIONS.append(boto3.session.Session())
    return _BOTO_SESSIONS[0].client(service, region_name="us-east-1", config=CLIENT_CONFIG)


def serialise_moto() -> None:
    """One DynamoDB (or ECS) request at a time inside in-process moto, as `duetime local`'s moto server does for
    DynamoDB (duetime.local.moto_server.SerializedDynamoDB): moto's backends take no locks, and a worker's threads
    calling it at once broke a TransactWriteItems (its deep copy of the table met another thread's write:
    "dictionary changed size during iteration"), as did an ECS run's polling beside a test's DescribeTasks. SQS is
    left alone: a long poll waits inside moto for a send."""
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber, "_duetime_serialised", False):
        return
    unlocked = BotocoreStubber.__call__

    def serialised(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        if not event_name.startswith(_SERIALISED):
            return unlocked(self, event_name, request, **kwargs)
        with _MOTO_LOCK:
            return unlocked(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = serialised  # type: ignore[method-assign]
    BotocoreStubber._duetime_serialised = True  # type: ignore[attr-defined]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The modules that import moto at the top (mock_aws in the test) answer through moto_speed's fast path too
    (the ports fixture and the simulation install it where they start moto)."""
    if "moto" in sys.modules:
        from duetime.local import moto_speed

        moto_speed.install()


# A thread a test left running (a receive loop whose test failed before stopping it, say) would keep this pytest
# process from exiting after its last test: `make test` would wait on it until CI's limit. At the end of the
# session such threads get a while to end; any still running fail the run, with their stacks, and the process
# exits anyway.
LEFTOVER_THREAD_GRACE_SECONDS = 30


def _leftover_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    deadline = time.monotonic() + LEFTOVER_THREAD_GRACE_SECONDS
    for thread in _leftover_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    if _leftover_threads():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's summary: print the threads still running, and exit without waiting on them."""
    leftover = _leftover_threads()
    if not leftover:
        return
    frames = sys._current_frames()
    sys.stderr.write(f"\n{len(leftover)} thread(s) a test started still run after the session; failing the run:\n")
    for thread in leftover:
        stack = "".join(traceback.format_stack(frames[thread.ident])) if thread.ident in frames else ""
        sys.stderr.write(f"--- {thread.name}\n{stack}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(pytest.ExitCode.TESTS_FAILED))


__all__ = ["BACKENDS", "BOTH_BACKENDS", "ROOT", "Clock"]
