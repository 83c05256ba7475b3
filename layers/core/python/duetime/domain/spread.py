"""Spreading the herd: each run of a job is due a deterministic delay after its slot (Jenkins' `H` idea).

The delay is a stable hash of the job id and the slot, so it is the same every time it is computed (submit,
dispatch, catch-up, claim, preview) and spread evenly across jobs: ten thousand `0 * * * *` jobs with
`jitterSeconds: 300` fall over five minutes, not into one second of one partition. `scheduledAt` stays the
slot; `dueAt` carries the delay. A run-now is never delayed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from duetime.domain.models import to_ms


def spread(job_id: str, slot: datetime, jitter_seconds: int) -> timedelta:
    """The delay of `job_id`'s run in `slot`: whole milliseconds in [0, jitter_seconds) (zero without jitter)."""
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{job_id}#{to_ms(slot)}".encode()).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (jitter_seconds * 1000))


def spread_due(job_id: str, slot: datetime, jitter_seconds: int) -> datetime:
    """When the run of `slot` is due: the slot plus its spread."""
    return slot + spread(job_id, slot, jitter_seconds)
