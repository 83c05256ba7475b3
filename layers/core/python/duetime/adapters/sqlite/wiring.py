"""Ports over one SQLite file: what `duetime local` and `duetime worker --data-dir` wire."""

from __future__ import annotations

from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import Settings
from duetime.service.context import Notifier, Ports


def sqlite_ports(
    database: Database, settings: Settings, notifier: Notifier, max_delay_seconds: float | None = None
) -> Ports:
    """The store and the due queues on `database` (Database.in_directory(data_dir) for a `--data-dir`)."""
    return Ports(
        store=SqliteStore(database, settings),
        queues=SqliteQueues(database, settings, max_delay_seconds),
        settings=settings,
        notifier=notifier,
    )
