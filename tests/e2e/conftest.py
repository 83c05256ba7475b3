"""End-to-end fixtures: one `duetime local` for the session, its callers over HTTP, and the long-running
observations, started with the session so they overlap other tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from duetime.local.system import LocalSystem

from tests.e2e.helpers import new_local_system
from tests.http_client import Api


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `observe_last` watch something that takes minutes of wall time (a cron job running
    on consecutive minutes): run them last, so the time they wait overlaps the rest of the suite."""
    items.sort(key=lambda item: item.get_closest_marker("observe_last") is not None)


@pytest.fixture(scope="session", name="local_system")
def session_local_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """One `duetime local` for the session on the e2e backend (DUETIME_E2E_BACKEND, default sqlite; moto runs
    the real handlers in the Lambda emulation), over real HTTP, with a 6-second lease so lease expiry is
    quick to observe. On moto every call a function makes is checked against its role's synthesized
    policies: the session fails if any was denied (a grant the code needs and the stack lacks)."""
    data_dir = tmp_path_factory.mktemp("duetime-local")
    system = new_local_system(data_dir, port=0, workers=4, lease_seconds=6, shards=4).start()
    yield system
    refused = []
    if system.moto is not None and system.faithful:
        from duetime.local.moto_server import denied_calls  # moto only where it runs

        refused = denied_calls(system.moto.endpoint_url)
    system.stop()
    assert not refused, f"calls the synthesized roles do not allow: {refused}"


@pytest.fixture(scope="session")
def api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("alice"))


@pytest.fixture(scope="session")
def other_api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("bob"))


@pytest.fixture(scope="session")
def worker_api(local_system: LocalSystem) -> Api:
    return Api(local_system.api_url, local_system.token("worker", worker=True))


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
    response = api.put("/calendars/e2e-holidays", json={"dates": dates})
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
