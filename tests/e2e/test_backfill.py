"""Backfill over HTTP and the CLI against `duetime local`: a past day of an hourly job runs once, as kind
`backfill`; a second request creates nothing; `forbid` runs the slots one after another."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from duetime.cli.main import main

from tests.e2e.helpers import command_output, executions, parse, submit, wait_terminal


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def this_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def test_a_past_day_of_an_hourly_job_runs_once_as_backfill(api, local_system, capsys):
    job = submit(api, name="backfill-day", handler="demo.echo", schedule={"cron": "0 * * * *", "timeZone": "UTC"})
    end = this_hour()
    day = {"from": iso(end - timedelta(days=1)), "to": iso(end), "overlap": "allow"}
    response = api.post(f"/jobs/{job['jobId']}/backfill", json=day)
    assert response.status_code == 200, response.text
    assert response.json()["created"] == 24 and response.json()["present"] == 0
    runs = wait_terminal(api, job["jobId"], timeout=60, count=24)
    assert {(e["kind"], e["status"]) for e in runs} == {("backfill", "succeeded")}
    # The CLI asks again for the same day: nothing new, all 24 present
    code = main(
        ["jobs", "backfill", job["jobId"], "--from", day["from"], "--to", day["to"], "--json",
         "--data-dir", str(local_system.data_dir), "--owner", "alice"]
    )  # fmt: skip
    again = json.loads(command_output(capsys)[0])
    assert code == 0 and (again["created"], again["present"]) == (0, 24)
    assert len([e for e in executions(api, job["jobId"]) if e["kind"] == "backfill"]) == 24
    # A range reaching into the future is refused naming `to`
    future = api.post(f"/jobs/{job['jobId']}/backfill", json={**day, "to": iso(end + timedelta(days=1))})
    assert future.status_code == 400 and future.json()["error"]["field"] == "to"


def test_forbid_runs_the_backfilled_slots_one_after_another(api):
    job = submit(api, name="backfill-serial", handler="demo.sleep", payload={"seconds": 1},
                 schedule={"cron": "0 * * * *", "timeZone": "UTC"})  # fmt: skip
    end = this_hour()
    response = api.post(f"/jobs/{job['jobId']}/backfill", json={"from": iso(end - timedelta(hours=3)), "to": iso(end)})
    assert response.status_code == 200 and response.json()["created"] == 3, response.text
    runs = sorted(wait_terminal(api, job["jobId"], timeout=90, count=3), key=lambda e: e["startedAt"])
    assert {e["status"] for e in runs} == {"succeeded"}
    for earlier, later in pairwise(runs):
        assert parse(earlier["finishedAt"]) <= parse(later["startedAt"])
