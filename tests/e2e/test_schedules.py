"""End to end: overlap forbid, pause then resume with each catch-up policy, run now."""

from __future__ import annotations

import time

import pytest

from tests.e2e.helpers import executions, parse, submit, wait_for, wait_terminal


def test_run_now_runs_at_once_without_disturbing_the_schedule(api):
    job = submit(api, handler="demo.echo", payload={"n": 1}, schedule={"cron": "0 3 1 1 *", "timeZone": "UTC"})
    response = api.post(f"/jobs/{job['jobId']}/run")
    assert response.status_code == 201, response.text
    manual = response.json()
    done = wait_for(
        lambda: [
            e
            for e in executions(api, job["jobId"])
            if e["executionId"] == manual["executionId"] and e["status"] == "succeeded"
        ],
        timeout=15,
        what="the manual run",
    )
    assert done[0]["kind"] == "manual" and done[0]["result"] == {"n": 1}
    after = api.get(f"/jobs/{job['jobId']}").json()
    assert after["nextRunAt"] == job["nextRunAt"]
    waiting = [e for e in executions(api, job["jobId"]) if e["status"] == "scheduled"]
    assert [e["scheduledAt"] for e in waiting] == [job["nextRunAt"]]


def test_cancel_ends_the_job_and_its_waiting_execution(api):
    job = submit(api, handler="demo.echo", schedule={"cron": "0 3 1 1 *", "timeZone": "UTC"})
    assert api.delete(f"/jobs/{job['jobId']}").status_code == 204
    assert api.get(f"/jobs/{job['jobId']}").json()["status"] == "cancelled"
    [execution] = wait_terminal(api, job["jobId"], timeout=5)
    assert execution["status"] == "cancelled"


@pytest.mark.observe_last
def test_forbid_records_the_next_run_skipped_with_reason_overlap(api, overlapping_job):
    job_id = overlapping_job["jobId"]

    def overlap_skip():
        rows = executions(api, job_id)
        return [e for e in rows if e["status"] == "skipped" and e["skipReason"] == "overlap"]

    [skipped, *_] = wait_for(overlap_skip, timeout=180, interval=2, what="a run skipped for overlap")
    rows = executions(api, job_id)
    earlier = [e for e in rows if parse(e["scheduledAt"]) < parse(skipped["scheduledAt"])]
    assert earlier and earlier[-1]["status"] in ("running", "succeeded")


@pytest.mark.observe_last
@pytest.mark.parametrize("policy", ["latest", "all", "none"])
def test_resume_after_missed_minutes_follows_the_catch_up_policy(api, paused_jobs, policy):
    job = paused_jobs["jobs"][policy]
    first_slot = parse(job["nextRunAt"]).timestamp()
    # Wait until at least three slots (the first plus two) have passed unrun
    time.sleep(max(0.0, first_slot + 125 - time.time()))
    resumed = api.patch(f"/jobs/{job['jobId']}", json={"status": "active"})
    assert resumed.status_code == 200, resumed.text
    missed = int((time.time() - first_slot) // 60) + 1

    def settled():
        rows = executions(api, job["jobId"])
        past = [e for e in rows if parse(e["scheduledAt"]).timestamp() <= first_slot + (missed - 1) * 60]
        return rows if past and all(e["status"] in ("succeeded", "skipped") for e in past) else None

    rows = wait_for(settled, timeout=60, interval=1, what=f"catch-up {policy} to settle")
    past = [e for e in rows if parse(e["scheduledAt"]).timestamp() <= first_slot + (missed - 1) * 60]
    ran = [e for e in past if e["status"] == "succeeded"]
    skipped_total = sum(e["skippedCount"] or 1 for e in past if e["status"] == "skipped")
    if policy == "latest":
        assert len(ran) == 1 and parse(ran[0]["scheduledAt"]).timestamp() == first_slot + (missed - 1) * 60
        assert skipped_total == missed - 1
    elif policy == "all":
        assert len(ran) == missed and skipped_total == 0
    else:
        assert ran == [] and skipped_total == missed
    future = [e for e in rows if e["status"] == "scheduled"]
    assert future, "the schedule goes on after catch-up"
