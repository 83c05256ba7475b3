"""End to end: an every-minute cron job runs on consecutive minutes, one execution each, none twice."""

from __future__ import annotations

import itertools

import pytest

from tests.e2e.helpers import executions, parse, wait_for

# How late a start may be in this suite: the scheduler's 2 s, plus what a loaded machine adds.
LATE_UNDER_LOAD = 10


@pytest.mark.observe_last
def test_an_every_minute_cron_job_runs_once_per_consecutive_minute(api, every_minute_job):
    job_id = every_minute_job["jobId"]

    def two_done():
        done = [e for e in executions(api, job_id) if e["status"] == "succeeded"]
        return done if len(done) >= 2 else None

    done = wait_for(two_done, timeout=150, interval=2, what="two minutes of runs")
    slots = sorted(parse(e["scheduledAt"]) for e in executions(api, job_id))
    assert len(slots) == len(set(slots)), "a slot was created twice"
    assert all((b - a).total_seconds() == 60 for a, b in itertools.pairwise(slots))
    for execution in done:
        assert parse(execution["scheduledAt"]).second == 0
        assert execution["attempt"] == 1
        # Started within its minute's first seconds, judged by the times the system recorded. The 2-s promise is
        # a p99 that bench/ measures on a quiet machine; here a dozen test processes share two cores, and a
        # start 2.4 s late (moto) is load, not a missed slot.
        assert 0 <= (parse(execution["startedAt"]) - parse(execution["scheduledAt"])).total_seconds() < LATE_UNDER_LOAD
