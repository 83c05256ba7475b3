"""End-to-end fixtures: long-running observations start with the session so they overlap other tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api


@pytest.fixture(scope="session", autouse=True)
def every_minute_job(api: Api) -> dict[str, Any]:
    """An every-minute cron job submitted when the e2e session starts; test_cron_minutes reads it."""
    response = api.post(
        "/jobs",
        json={
            "name": "every-minute",
            "handler": "demo.echo",
            "schedule": {"cron": "* * * * *", "timeZone": "Europe/London"},
        },
    )
    assert response.status_code == 201, response.text
    return dict(response.json())
