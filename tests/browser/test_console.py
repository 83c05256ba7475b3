"""The web console in headless Chromium against a real `duetime local`: sign in, create, watch, act."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.browser.pages import (
    PHONE_WIDTH,
    create_job,
    css,
    fill,
    fits_a_phone,
    open_new_job_form,
    set_once_in,
    signed_in,
    unlabelled_controls,
    visible_text,
    wait_for,
)

# A one-off due this far ahead: long enough to see it `scheduled` first, however slowly a loaded machine fills
# the form and creates the job (6 s was crossed on a loaded CI machine: the run was over before the page first
# drew it), short enough to watch it run.
ONE_OFF_LEAD_SECONDS = 25
RUN_WAIT_SECONDS = 90
# An excluded slot is recorded skipped once its minute has passed and the pre-loader has looked.
SKIP_WAIT_SECONDS = 150


def test_the_console_is_served_with_a_content_security_policy(local: Any) -> None:
    import requests

    page = requests.get(f"{local.base_url}/console/", timeout=10)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "<script>" not in page.text  # no inline script: the CSP would refuse it
    assert local.console_link.startswith(f"{local.base_url}/console/#token=")


def test_a_refused_token_keeps_the_user_on_the_sign_in_page(browser: Any, local: Any) -> None:
    browser.get(f"{local.base_url}/console/#/signin")
    wait_for(browser, visible_text("h1", "Sign in"))
    fill(browser, "#token", "not-a-token")
    css(browser, "#sign-in button[type=submit]").click()
    wait_for(browser, visible_text("#token-error", "Sign-in failed"))


def test_the_start_up_link_signs_in_and_drops_the_token_from_the_address(
    browser: Any, local: Any, screenshot: Any
) -> None:
    signed_in(browser, local)
    assert "token=" not in browser.current_url
    screenshot(browser, "jobs-empty")


def test_a_cron_job_in_new_york_shows_its_next_runs_with_the_zone_offsets(
    browser: Any, local: Any, screenshot: Any
) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "America/New_York")
    fill(browser, "#f-cron", "30 2 * * *")
    wait_for(browser, visible_text("#preview", "at 02:30 every day (America/New_York)"))
    # Live validation from the API: a bad cron names its field before anything is submitted.
    fill(browser, "#f-cron", "61 2 * * *")
    wait_for(browser, lambda d: css(d, "#f-cron").get_attribute("aria-invalid") == "true")
    assert css(browser, "#f-cron-error").text
    fill(browser, "#f-cron", "30 2 * * *")
    wait_for(browser, visible_text("#preview", "02:30"))
    screenshot(browser, "create-form")
    assert unlabelled_controls(browser) == []
    create_job(browser, "nightly-report-ny", timeZone="America/New_York")
    wait_for(browser, visible_text("#next-runs", "02:30"))
    runs = css(browser, "#next-runs").text
    # Each run at 02:30 New York time, with that instant's offset (EST -05:00 or EDT -04:00).
    assert re.findall(r"02:30 UTC-0[45]:00", runs), runs
    for line in runs.splitlines():
        offset = "07:30:00 UTC" if "UTC-05:00" in line else "06:30:00 UTC"
        assert offset in line, line
    assert "Created job" in css(browser, "#notice").text
    screenshot(browser, "job-cron")


def test_a_one_off_reaches_succeeded_without_reloading(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    set_once_in(browser, ONE_OFF_LEAD_SECONDS)
    wait_for(browser, visible_text("#preview", "once, at"))
    create_job(browser, "one-off-soon", payload='{"greeting": "hello"}')
    page = css(browser, "main")
    wait_for(browser, visible_text("#history", "scheduled"))
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    assert css(browser, "main") == page  # the same document: it polled, nothing reloaded
    assert "hello" in css(browser, "#history").text  # the result (demo.echo returns its payload)
    css(browser, "#chart")
    assert unlabelled_controls(browser) == []
    screenshot(browser, "job-succeeded")


def test_every_attempt_of_a_retried_run_shows_with_its_error(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "America/New_York")
    fill(browser, "#f-cron", "0 6 * * 1-5")
    wait_for(browser, visible_text("#preview", "06:00"))
    create_job(
        browser, "flaky-import", handler="demo.fail", payload='{"times": 1}', maxAttempts="3", baseDelaySeconds="1"
    )
    css(browser, "#run-now").click()
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    attempts = browser.find_elements("css selector", "#history tr.attempt")
    assert [row.text.split()[:3] for row in attempts] == [["↳", "attempt", "1"], ["↳", "attempt", "2"]], [
        row.text for row in attempts
    ]
    assert "failed" in attempts[0].text and attempts[0].find_elements("css selector", "td")[7].text != "—"
    for _ in range(2):  # more runs for the chart of docs/jobs.md's picture
        css(browser, "#run-now").click()
        wait_for(browser, visible_text("#notice", "Run now: execution"))
    wait_for(browser, lambda d: len(d.find_elements("css selector", "#history tr[data-status=succeeded]")) == 3, 60)
    screenshot(browser, "job-attempts")


def test_slots_on_excluded_dates_show_as_skipped_with_the_reason(browser: Any, local: Any, screenshot: Any) -> None:
    today = datetime.now(UTC).date()
    excluded = f"{today.isoformat()}/{(today + timedelta(days=1)).isoformat()}"
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "UTC")
    fill(browser, "#f-cron", "* * * * *")
    fill(browser, "#f-exclude", "not-a-date")
    wait_for(browser, lambda d: css(d, "#f-exclude").get_attribute("aria-invalid") == "true")
    fill(browser, "#f-exclude", excluded)
    resumes = f"{(today + timedelta(days=2)).isoformat()} 00:00"
    wait_for(browser, visible_text("#preview", resumes))  # the preview skips the excluded days
    create_job(browser, "minutely-but-not-today")
    wait_for(browser, visible_text("#history", "skipped: excluded"), SKIP_WAIT_SECONDS)
    screenshot(browser, "job-skipped")


def test_pause_with_a_note_resume_and_run_now_confirm_what_they_did(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "UTC")
    fill(browser, "#f-cron", "0 3 * * *")
    wait_for(browser, visible_text("#preview", "03:00"))
    create_job(browser, "pausable")
    css(browser, "#pause").click()
    fill(browser, "#pause-note", "the vendor's API is down until Monday")
    screenshot(browser, "job-pause-note")
    css(browser, "#confirm-pause").click()
    wait_for(browser, visible_text("#notice", "Paused"))
    wait_for(browser, visible_text("#job-status", "paused"))
    wait_for(browser, visible_text("#job-note", "the vendor's API is down until Monday"))  # why, on the job
    wait_for(browser, visible_text("#next-runs", "No runs while the job is paused"))
    assert not browser.find_elements("css selector", "#run-now")  # only an active job runs now
    css(browser, "#resume").click()
    css(browser, "#confirm-resume").click()  # no note: the pause's note is cleared
    wait_for(browser, visible_text("#notice", "Resumed"))
    wait_for(browser, visible_text("#job-status", "active"))
    assert not browser.find_elements("css selector", "#job-note")
    css(browser, "#run-now").click()
    wait_for(browser, visible_text("#notice", "Run now: execution"))
    wait_for(browser, visible_text("#history", "manual"))
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    wait_for(browser, visible_text("#health", "succeeded"))  # the schedule's health: its last run and success
    screenshot(browser, "job-run-now")
    screenshot(browser, "job-run-now-phone", width=PHONE_WIDTH)
    assert fits_a_phone(browser)
    css(browser, "#cancel").click()
    css(browser, "#confirm-cancel").click()
    wait_for(browser, visible_text("#notice", "Cancelled"))
    wait_for(browser, visible_text("#job-status", "cancelled"))
    assert not browser.find_elements("css selector", "#run-now")  # no dead buttons on a cancelled job
    assert not browser.find_elements("css selector", "#edit")


def test_a_failed_execution_opens_with_its_error_and_retries(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    set_once_in(browser, ONE_OFF_LEAD_SECONDS)
    wait_for(browser, visible_text("#preview", "once, at"))
    # Its first attempt fails for good (no retry left); a retry by hand is attempt 2, which succeeds.
    job_id = create_job(
        browser, "always-fails", handler="demo.fail", payload='{"times": 1, "permanent": true}', maxAttempts="1"
    )
    wait_for(browser, visible_text("#history", "failed"), RUN_WAIT_SECONDS)
    css(browser, "#failed-link").click()
    wait_for(browser, visible_text("h1", "Failed executions of always-fails"))
    screenshot(browser, "failed-executions")
    css(browser, "#failed tbody a").click()
    wait_for(browser, visible_text("h1", "Execution of always-fails"))
    assert css(browser, "#execution-error").text
    assert job_id in browser.current_url
    screenshot(browser, "execution-failed")
    css(browser, "#retry-execution").click()
    wait_for(browser, visible_text("#notice", "Retried execution"))
    wait_for(browser, visible_text("h1", "always-fails"))
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    assert "succeededOnAttempt" in css(browser, "#history").text


def test_the_jobs_list_filters_and_shows_last_results(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    wait_for(browser, visible_text("#jobs", "one-off-soon"))
    wait_for(browser, visible_text("#jobs", "succeeded"))  # a last result, read from the job's executions
    fill(browser, "#search", "nightly")
    wait_for(browser, visible_text("#jobs-summary", "1 of"))
    assert "one-off-soon" not in css(browser, "#jobs").text
    wait_for(browser, visible_text("#jobs td[data-col=next]", "07:30:00 UTC"))  # 02:30 in New York
    fill(browser, "#search", "")
    wait_for(browser, visible_text("#jobs", "one-off-soon"))
    screenshot(browser, "jobs")


def test_a_seconds_cron_reads_in_words_in_the_create_form(browser: Any, local: Any) -> None:
    """A six-field cron (seconds first) is previewed by the API and read in words: `*/5 * * * * *` is every
    5 seconds; at second 0 it reads as its five fields; a bad seconds field names the cron field."""
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "UTC")
    fill(browser, "#f-cron", "*/5 * * * * *")
    wait_for(browser, visible_text("#preview", "every 5 seconds (UTC)"))
    fill(browser, "#f-cron", "0 30 2 * * *")
    wait_for(browser, visible_text("#preview", "at 02:30 every day (UTC)"))
    fill(browser, "#f-cron", "60 * * * * *")
    wait_for(browser, lambda d: css(d, "#f-cron").get_attribute("aria-invalid") == "true")
    assert "second" in css(browser, "#f-cron-error").text
