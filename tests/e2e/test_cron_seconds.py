"""End to end through the API on `duetime local` (either backend: DUETIME_E2E_BACKEND): a `*/5 * * * * *` job
and a 2-second interval job run several times, each slot of their grid at most once.

Judged by what the system recorded (slots, attempts, start times), never by wall-clock boundaries: on a loaded
machine a start may be late (bench/seconds.py measures the lateness on a quiet one), or a slot missed and
recorded skipped; the grid and the counts hold either way.
"""

from __future__ import annotations

import itertools
from typing import Any

from tests.e2e.helpers import executions, parse, submit, wait_for

RUNS = 4
# Generous: 4 runs of a 5-second job take 20 s on a quiet machine.
TIMEOUT = 150


def runs_on_their_grid(api: Any, job: dict[str, Any], step: float) -> list[dict[str, Any]]:
    """Wait for RUNS succeeded runs of `job`, cancel it, and check every recorded slot lies on its `step`-second
    grid once; returns the succeeded runs."""
    job_id = job["jobId"]

    def done() -> list[dict[str, Any]] | None:
        found = [e for e in executions(api, job_id) if e["status"] == "succeeded"]
        return found if len(found) >= RUNS else None

    try:
        succeeded = wait_for(done, timeout=TIMEOUT, interval=1, what=f"{RUNS} runs every {step:g} s")
    finally:
        assert api.delete(f"/jobs/{job_id}").status_code == 204
    rows = executions(api, job_id)
    slots = sorted(parse(e["scheduledAt"]) for e in rows if e["kind"] == "scheduled")
    assert len(slots) == len(set(slots)), "a slot was created twice"
    first = parse(job["nextRunAt"])
    assert slots[0] == first
    assert all((slot - first).total_seconds() % step == 0 for slot in slots), slots
    for execution in succeeded:
        assert execution["attempt"] == 1
        # Never started before its slot (the queue delivers at the due time; SQS's early message is held).
        assert parse(execution["startedAt"]) >= parse(execution["scheduledAt"])
    return list(succeeded)


def test_a_five_second_cron_job_runs_on_its_grid(api):
    job = submit(api, handler="demo.echo", schedule={"cron": "*/5 * * * * *", "timeZone": "Europe/Paris"})
    assert parse(job["nextRunAt"]).second % 5 == 0
    succeeded = runs_on_their_grid(api, job, 5)
    slots = sorted(parse(e["scheduledAt"]) for e in succeeded)
    assert all(slot.second % 5 == 0 and slot.microsecond == 0 for slot in slots)
    # Several distinct slots ran, each 5 s (or a multiple, a slot missed under load) after the one before.
    assert all((b - a).total_seconds() % 5 == 0 and b > a for a, b in itertools.pairwise(slots))


def test_a_two_second_interval_job_runs_on_its_grid(api):
    job = submit(api, handler="demo.echo", schedule={"every": "2s"})
    runs_on_their_grid(api, job, 2)
