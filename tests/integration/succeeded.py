"""Waiting for a worker's receive loop to run jobs: each job's first execution, once all have succeeded."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from duetime.domain.models import Execution, ExecutionStatus, Job


def first_runs_once_succeeded(
    ports: Any, jobs: Sequence[Job], seconds: float = 30, poll: float = 0.2
) -> list[Execution]:
    """Each job's first execution as it stands once all have succeeded, or after `seconds` (the caller asserts)."""
    deadline = time.monotonic() + seconds
    while True:
        rows = [ports.store.executions_of_job(job.job_id)[0] for job in jobs]
        if all(r.status == ExecutionStatus.SUCCEEDED for r in rows) or time.monotonic() >= deadline:
            return rows
        time.sleep(poll)
