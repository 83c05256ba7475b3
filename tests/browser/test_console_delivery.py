"""The console's create form and job page for delivery per job and lateness budgets (issue 34): at-most-once
sets one attempt and the job page says the job never starts a slot twice; a budget is set on the form, and
the job page shows the share of runs started within it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.browser.pages import (
    Api,
    create_job,
    css,
    fill,
    open_new_job_form,
    signed_in,
    unlabelled_controls,
    visible_text,
    wait_for,
)

RUN_WAIT_SECONDS = 60


def test_an_at_most_once_job_with_a_budget_is_created_and_its_page_says_so(browser: Any, local: Any) -> None:
    from selenium.webdriver.support.ui import Select

    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-cron", "0 6 * * *")
    Select(css(browser, "#f-delivery")).select_by_value("at-most-once")
    assert css(browser, "#f-maxAttempts").get_attribute("value") == "1"
    assert unlabelled_controls(browser) == []
    job_id = create_job(browser, "payment-file", lateAfterSeconds="90")
    assert "at-most-once" in css(browser, "#spec-delivery").text
    assert "no runs counted in 7 days" in css(browser, "#within-budget").text
    job = Api(local).call("GET", f"/jobs/{job_id}", expect=200)
    assert job["delivery"] == "at-most-once" and job["retry"]["maxAttempts"] == 1
    assert job["lateAfterSeconds"] == 90


def test_the_job_page_shows_the_share_of_runs_started_within_budget(browser: Any, local: Any) -> None:
    api = Api(local)
    # A one-off due 30 s ago starts at once: late against its 5 s budget
    due = (datetime.now(UTC) - timedelta(seconds=30)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    body = {"name": "late-report", "handler": "demo.echo", "schedule": {"at": due}, "lateAfterSeconds": 5}
    job = api.call("POST", "/jobs", body, expect=201)
    deadline = time.monotonic() + RUN_WAIT_SECONDS
    while api.call("GET", f"/jobs/{job['jobId']}")["withinBudget"][0]["late"] != 1:
        assert time.monotonic() < deadline, "the late run was never counted"
        time.sleep(0.25)
    signed_in(browser, local)
    browser.get(f"{local.base_url}/console/#/jobs/{job['jobId']}")
    wait_for(browser, visible_text("#within-budget", "0.0% in 7 days (1 late of 1)"))
    assert "budget 5 s after due" in css(browser, "#within-budget").text
