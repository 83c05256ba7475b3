"""End to end: an every-minute cron job runs on consecutive minutes, one execution each, none twice."""

from __future__ import annotations

import itertools

import pytest

from tests.e2e.helpers import executions, parse, wait_for


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
        assert (parse(execution["startedAt"]) - parse(execution["scheduledAt"])).total_seconds() < 2
