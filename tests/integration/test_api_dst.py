"""A cron schedule's DST policy (schedule.dst) through the API handler on both backends: the preview shows
each policy's runs, a job stores it, plans its first run by it and shows it; bad policies are 400."""

from __future__ import annotations

from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_api_contract import SECRET, Client, assert_error

pytestmark = BOTH_BACKENDS

# America/New_York: 02:00-03:00 does not exist on 2027-03-14; 01:00-02:00 happens twice on 2027-11-07
# (01:30 EDT is 05:30Z, 01:30 EST 06:30Z). The hand clock stands at 2026-12-01 09:00Z.
NEW_YORK = "America/New_York"


@pytest.fixture
def alice(ports: Any) -> Client:
    return Client(build_app(ports, local_secret=SECRET), issue_token(SECRET, "alice"))


def preview(client: Client, dst: dict[str, str] | None, cron: str, start: str, count: int) -> list[str]:
    body: dict[str, Any] = {"cron": cron, "timeZone": NEW_YORK, "from": start, "count": count}
    if dst is not None:
        body["dst"] = dst
    code, answer = client.call("POST", "/schedules/preview", body)
    assert code == 200, answer
    return list(answer["runs"])


FOLDS = [
    (None, ["2027-11-07T05:30:00.000Z", "2027-11-08T06:30:00.000Z"]),  # fixed-time: once, first
    ({"fold": "first"}, ["2027-11-07T05:30:00.000Z", "2027-11-08T06:30:00.000Z"]),
    ({"fold": "last"}, ["2027-11-07T06:30:00.000Z", "2027-11-08T06:30:00.000Z"]),
    ({"fold": "both"}, ["2027-11-07T05:30:00.000Z", "2027-11-07T06:30:00.000Z"]),
]
GAPS = [
    (None, ["2027-03-14T07:00:00.000Z", "2027-03-15T06:30:00.000Z"]),  # fixed-time: at the gap's end
    ({"gap": "shift"}, ["2027-03-14T07:00:00.000Z", "2027-03-15T06:30:00.000Z"]),
    ({"gap": "skip"}, ["2027-03-15T06:30:00.000Z", "2027-03-16T06:30:00.000Z"]),
]


@pytest.mark.parametrize(("dst", "expected"), FOLDS)
def test_the_preview_shows_each_fold_policy(alice, dst, expected):
    assert preview(alice, dst, "30 1 * * *", "2027-11-07T00:00:00Z", 2) == expected


@pytest.mark.parametrize(("dst", "expected"), GAPS)
def test_the_preview_shows_each_gap_policy(alice, dst, expected):
    assert preview(alice, dst, "30 2 * * *", "2027-03-14T00:00:00Z", 2) == expected


def test_a_schedule_that_follows_the_clock_takes_a_gap_shift(alice):
    # 02:15 does not exist: by default an hourly schedule skips it, with `shift` it runs at 03:00 EDT
    runs = ["2027-03-14T06:15:00.000Z", "2027-03-14T07:15:00.000Z"]
    assert preview(alice, None, "15 * * * *", "2027-03-14T06:00:00Z", 2) == runs
    shifted = ["2027-03-14T06:15:00.000Z", "2027-03-14T07:00:00.000Z", "2027-03-14T07:15:00.000Z"]
    assert preview(alice, {"gap": "shift"}, "15 * * * *", "2027-03-14T06:00:00Z", 3) == shifted


@pytest.mark.parametrize(("dst", "expected"), FOLDS + GAPS[1:])
def test_a_job_stores_its_policy_and_plans_its_runs_by_it(alice, dst, expected):
    in_fall = expected[0] >= "2027-11"
    cron, start = ("30 1 * * *", "2027-11-07T00:00:00Z") if in_fall else ("30 2 * * *", "2027-03-14T00:00:00Z")
    schedule: dict[str, Any] = {"cron": cron, "timeZone": NEW_YORK, "startAt": start}
    if dst is not None:
        schedule["dst"] = dst
    code, job = alice.call("POST", "/jobs", {"name": "dst", "handler": "demo.echo", "schedule": schedule})
    assert code == 201, job
    shown_dst = dst  # only the keys given
    assert job["schedule"]["dst"] == shown_dst
    assert job["nextRunAt"] == expected[0] and job["nextRuns"][:2] == expected
    code, shown = alice.call("GET", f"/jobs/{job['jobId']}")
    assert code == 200 and shown["schedule"]["dst"] == shown_dst and shown["nextRuns"][:2] == expected


def test_an_edit_changes_the_policy_and_replans(alice):
    schedule = {"cron": "30 1 * * *", "timeZone": NEW_YORK, "startAt": "2027-11-07T00:00:00Z"}
    code, job = alice.call("POST", "/jobs", {"name": "dst", "handler": "demo.echo", "schedule": schedule})
    assert code == 201 and job["nextRunAt"] == "2027-11-07T05:30:00.000Z"
    edit = {"version": job["version"], "schedule": {**schedule, "dst": {"fold": "last"}}}
    code, edited = alice.call("PATCH", f"/jobs/{job['jobId']}", edit)
    assert code == 200, edited
    assert edited["schedule"]["dst"] == {"fold": "last"}
    assert edited["nextRunAt"] == "2027-11-07T06:30:00.000Z"


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"cron": "30 1 * * *", "dst": {"fold": "second"}}, "schedule.dst.fold"),
        ({"cron": "30 1 * * *", "dst": {"gap": "later"}}, "schedule.dst.gap"),
        ({"cron": "30 1 * * *", "dst": {"overlap": "first"}}, "schedule.dst.overlap"),
        ({"every": "1h", "dst": {"gap": "skip"}}, "schedule.dst"),
        ({"at": "2026-12-02T00:00:00Z", "dst": {"fold": "both"}}, "schedule.dst"),
    ],
)
def test_a_bad_policy_is_400_naming_the_field(alice, schedule, field):
    assert_error(alice.call("POST", "/jobs", {"name": "dst", "handler": "demo.echo", "schedule": schedule}), 400, field)
    assert_error(alice.call("POST", "/schedules/preview", schedule), 400, field.removeprefix("schedule."))


def test_a_preview_asked_for_its_forecast_answers_it(alice):
    body = {"cron": "0 * * * *", "timeZone": NEW_YORK, "from": "2027-01-04T00:00:00Z", "count": 1}
    code, answer = alice.call("POST", "/schedules/preview", body)
    assert code == 200 and "forecast" not in answer  # only when asked
    code, answer = alice.call("POST", "/schedules/preview", {**body, "forecast": True})
    assert code == 200, answer
    ahead = answer["forecast"]
    assert (ahead["runsPerDay"], ahead["runsPerMonth"]) == (24.0, 730.0)
    assert ahead["costPerMonthUsd"] == pytest.approx(730 * ahead["costPerRunUsd"], rel=1e-3)
    assert ahead["herd"] is True and ahead["suggestedJitterSeconds"] == 60 and ahead["pricesAsOf"]
    # Excluded dates are left out of the count too; a bad flag is 400 naming it
    excluded = {**body, "cron": "0 9 * * *", "forecast": True, "exclude": ["2027-01-10/2027-01-19"]}
    assert alice.call("POST", "/schedules/preview", excluded)[1]["forecast"]["runsPerMonth"] == round(355 / 12, 2)
    assert_error(alice.call("POST", "/schedules/preview", {**body, "forecast": "maybe"}), 400, "forecast")
