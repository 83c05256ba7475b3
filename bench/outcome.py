"""What a benchmark reads back of one job: its first run's times and status. Its own module, so that the Celery
peer's task module (bench.peer_tasks) and the systems (bench.systems), which start that peer, share it without
importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    """One submitted job's first run as the system recorded it (milliseconds since the epoch)."""

    scheduled_ms: int
    started_ms: int | None
    finished_ms: int | None
    status: str
    runs: int = 1  # attempts (duetime) or times the task body ran (Celery)
