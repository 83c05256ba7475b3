"""End-to-end fixtures: long-running observations start with the session so they overlap other tests."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import Api


def _submit(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.fixture(scope="session", autouse=True)
def every_minute_job(api: Api) -> dict[str, Any]:
    """An every-minute cron job submitted when the e2e session starts; test_cron_minutes reads it."""
    return _submit(
        api,
        {
            "name": "every-minute",
            "handler": "demo.echo",
            "schedule": {"cron": "* * * * *", "timeZone": "Europe/London"},
        },
    )


@pytest.fixture(scope="session", autouse=True)
def overlapping_job(api: Api) -> dict[str, Any]:
    """Every minute, each run 75 s long, overlap forbidden: the run after the first must be skipped."""
    return _submit(
        api,
        {
            "name": "overlapping",
            "handler": "demo.sleep",
            "payload": {"seconds": 75},
            "timeoutSeconds": 120,
            "overlap": "forbid",
            "schedule": {"cron": "* * * * *", "timeZone": "UTC"},
        },
    )


@pytest.fixture(scope="session", autouse=True)
def paused_jobs(api: Api) -> dict[str, Any]:
    """Three every-minute jobs, one per catch-up policy, paused at once; resumed minutes later."""
    jobs = {}
    for policy in ("latest", "all", "none"):
        job = _submit(
            api,
            {
                "name": f"catch-up-{policy}",
                "handler": "demo.echo",
                "catchUp": policy,
                "schedule": {"cron": "* * * * *", "timeZone": "UTC"},
            },
        )
        paused = api.patch(f"/jobs/{job['jobId']}", json={"status": "paused"})
        assert paused.status_code == 200 and paused.json()["status"] == "paused", paused.text
        jobs[policy] = job
    return {"jobs": jobs, "paused_at": time.time()}


@pytest.fixture(scope="session", autouse=True)
def excluded_job(api: Api) -> dict[str, Any]:
    """Every minute, with today and tomorrow (UTC) excluded: its first slot must be recorded `excluded`."""
    today = datetime.now(UTC).date()
    return _submit(
        api,
        {
            "name": "excluded-days",
            "handler": "demo.echo",
            "schedule": {"cron": "* * * * *", "timeZone": "UTC"},
            "exclude": [f"{today.isoformat()}/{(today + timedelta(days=1)).isoformat()}"],
        },
    )


@pytest.fixture(scope="session", autouse=True)
def calendar_job(api: Api) -> dict[str, Any]:
    """Every minute, excluding a named calendar that holds today and tomorrow (UTC): as `excluded_job`, by name."""
    today = datetime.now(UTC).date()
    dates = [f"{today.isoformat()}/{(today + timedelta(days=1)).isoformat()}"]
    response = api.request("PUT", "/calendars/e2e-holidays", json={"dates": dates})
    assert response.status_code in (200, 201), response.text
    job = _submit(
        api,
        {
            "name": "calendar-days",
            "handler": "demo.echo",
            "schedule": {"cron": "* * * * *", "timeZone": "UTC"},
            "exclude": ["calendar:e2e-holidays"],
        },
    )
    return {**job, "calendarDates": dates}
