"""Running a worker's receive loop in a test, and waiting for it to run jobs: each job's first execution,
once all have succeeded."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from duetime.domain.models import Execution, ExecutionStatus, Job
from duetime.worker.runtime import Worker


@contextmanager
def worker_loop(worker: Worker, grace_seconds: float = 1) -> Iterator[threading.Thread]:
    """`worker.run` on a thread of its own for the block, stopped (and joined) however the block ends: a test
    that fails inside must not leave a receive loop polling after its fixtures are gone (against moto's
    default endpoint, once mock_aws has ended, that loop would keep the pytest process from ever exiting)."""
    thread = threading.Thread(
        target=worker.run, kwargs={"grace_seconds": grace_seconds}, name=f"loop-{worker.worker_id}", daemon=True
    )
    thread.start()
    try:
        yield thread
    finally:
        worker.stopping.set()
        thread.join(timeout=15)


def first_runs_once_succeeded(
    ports: Any, jobs: Sequence[Job], seconds: float = 30, poll: float = 0.2
) -> list[Execution]:
    """Each job's first execution as it stands once all have succeeded, or after `seconds` (the caller asserts)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            rows = [ports.store.executions_of_job(job.job_id)[0] for job in jobs]
        except RuntimeError:  # moto in process is not thread-safe: a worker thread changed the item being read
            if time.monotonic() >= deadline:
                raise
            time.sleep(poll)
            continue
        if all(r.status == ExecutionStatus.SUCCEEDED for r in rows) or time.monotonic() >= deadline:
            return rows
        time.sleep(poll)
