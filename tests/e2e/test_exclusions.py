"""End to end over `duetime local`: slots on excluded dates, inline or in a named calendar, appear in the
history, skipped as `excluded`."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from tests.e2e.helpers import executions, parse, wait_for


@pytest.mark.observe_last
def test_excluded_slots_are_one_skipped_record_in_the_history(api, excluded_job):
    assert_one_excluded_record(api, excluded_job["jobId"], excluded_job["exclude"][0])


@pytest.mark.observe_last
def test_a_named_calendars_slots_are_one_skipped_record_in_the_history(api, calendar_job):
    assert_one_excluded_record(api, calendar_job["jobId"], calendar_job["calendarDates"][0])
    # The calendar cannot go while the job excludes it; once the job is cancelled it can
    refused = api.delete("/calendars/e2e-holidays")
    assert refused.status_code == 409 and calendar_job["jobId"] in refused.json()["error"]["message"]
    assert api.delete(f"/jobs/{calendar_job['jobId']}").status_code == 204
    assert api.delete("/calendars/e2e-holidays").status_code == 204


def assert_one_excluded_record(api, job_id, excluded_range):
    last_excluded = date.fromisoformat(excluded_range.split("/")[1])
    resumes = datetime.combine(last_excluded + timedelta(days=1), datetime.min.time(), UTC)
    # The job shows only runs that will happen: none before the exclusion ends.
    job = api.get(f"/jobs/{job_id}").json()
    assert parse(job["nextRunAt"]) == resumes, job

    def skipped():
        found = [e for e in executions(api, job_id) if e["status"] == "skipped"]
        return found or None

    (record,) = wait_for(skipped, timeout=120, interval=2, what="the excluded slots' skip record")
    assert record["skipReason"] == "excluded"
    slot = parse(record["scheduledAt"])
    # One record for every remaining minute of the excluded days, from its own slot on.
    assert record["skippedCount"] == (resumes - slot) // timedelta(minutes=1)
    history = executions(api, job_id)
    assert [e["status"] for e in history if e["status"] not in ("skipped", "scheduled")] == []  # nothing ran
    waiting = [parse(e["scheduledAt"]) for e in history if e["status"] == "scheduled"]
    assert waiting == [resumes]  # the chain goes on after the exclusion
