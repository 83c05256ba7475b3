"""The web console in headless Chromium against a real `duetime local`: sign in, create, watch, act."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 30
# A one-off due this far ahead: long enough to see it `scheduled` first, short enough to watch it run.
ONE_OFF_LEAD_SECONDS = 6
RUN_WAIT_SECONDS = 90
# An excluded slot is recorded skipped once its minute has passed and the pre-loader has looked.
SKIP_WAIT_SECONDS = 150
PHONE_WIDTH = 390


def wait_for(driver: Any, condition: Callable[[Any], Any], seconds: float = WAIT_SECONDS) -> Any:
    """Waits for `condition`; on a timeout, fails with what the page showed (the notice and the main view)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.2).until(condition)
    except TimeoutException:
        shown = driver.execute_script("return document.body.innerText")
        raise AssertionError(f"timed out after {seconds} s at {driver.current_url}; the page shows:\n{shown}") from None


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def visible_text(selector: str, text: str) -> Callable[[Any], bool]:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def check(driver: Any) -> bool:
        try:
            return text in css(driver, selector).text
        except (NoSuchElementException, StaleElementReferenceException):
            return False

    return check


def signed_in(browser: Any, local: Any) -> None:
    browser.get(local.console_link)
    wait_for(browser, visible_text("h1", "Jobs"))


def fill(browser: Any, selector: str, value: str) -> None:
    """Types `value` over the field's text as a user would (select all, delete, type): every key fires `input`."""
    from selenium.webdriver.common.keys import Keys

    field = css(browser, selector)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    field.send_keys(value)


def set_once_in(browser: Any, seconds: int) -> None:
    """Pick `Once` and put a time `seconds` from now (the browser's local time) in the datetime-local field."""
    css(browser, "#kind-at").click()
    browser.execute_script(
        """const d = new Date(Date.now() + arguments[0] * 1000); const p = (n) => String(n).padStart(2, '0');
        const input = document.getElementById('f-at');
        input.value = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:` +
          `${p(d.getMinutes())}:${p(d.getSeconds())}`;
        input.dispatchEvent(new Event('input', {bubbles: true}));""",
        seconds,
    )


def create_job(browser: Any, name: str, handler: str = "demo.echo", payload: str = "{}", **extra: str) -> str:
    """Submits the New job form (its schedule set by the caller first) and returns the new job's id."""
    fill(browser, "#f-name", name)
    fill(browser, "#f-handler", handler)
    fill(browser, "#f-payload", payload)
    for field, value in extra.items():
        fill(browser, f"#f-{field}", value)
    css(browser, "#create").click()
    wait_for(browser, visible_text("h1", name))
    found = re.search(r"#/jobs/(j_[0-9a-f]+)", browser.current_url)
    assert found, browser.current_url
    return found.group(1)


def unlabelled_controls(browser: Any) -> list[str]:
    """The form controls and buttons on the page that a screen reader could not name."""
    return list(
        browser.execute_script(
            """return [...document.querySelectorAll('input, select, textarea, button')]
              .filter((c) => !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.textContent.trim())
              .map((c) => c.outerHTML);"""
        )
    )


def open_new_job_form(browser: Any) -> None:
    browser.get(browser.current_url.split("#")[0] + "#/new")
    wait_for(browser, visible_text("h1", "New job"))


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
    for _ in range(2):  # more runs for the chart of the README's picture
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


def test_pause_resume_and_run_now_confirm_what_they_did(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-timeZone", "UTC")
    fill(browser, "#f-cron", "0 3 * * *")
    wait_for(browser, visible_text("#preview", "03:00"))
    create_job(browser, "pausable")
    css(browser, "#pause").click()
    wait_for(browser, visible_text("#notice", "Paused"))
    wait_for(browser, visible_text("#job-status", "paused"))
    wait_for(browser, visible_text("#next-runs", "No runs while the job is paused"))
    css(browser, "#resume").click()
    wait_for(browser, visible_text("#notice", "Resumed"))
    wait_for(browser, visible_text("#job-status", "active"))
    css(browser, "#run-now").click()
    wait_for(browser, visible_text("#notice", "Run now: execution"))
    wait_for(browser, visible_text("#history", "manual"))
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    screenshot(browser, "job-run-now")
    screenshot(browser, "job-run-now-phone", width=PHONE_WIDTH)
    browser.set_window_size(PHONE_WIDTH, 800)
    # Readable on a phone: the page does not scroll sideways (wide tables scroll inside their own box).
    assert browser.execute_script("return document.documentElement.scrollWidth") <= PHONE_WIDTH
    browser.set_window_size(1280, 900)
    css(browser, "#cancel").click()
    css(browser, "#confirm-cancel").click()
    wait_for(browser, visible_text("#notice", "Cancelled"))
    wait_for(browser, visible_text("#job-status", "cancelled"))
    assert not browser.find_elements("css selector", "#run-now")  # no dead buttons on a cancelled job


def test_a_failed_execution_opens_with_its_error(browser: Any, local: Any, screenshot: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    set_once_in(browser, ONE_OFF_LEAD_SECONDS)
    wait_for(browser, visible_text("#preview", "once, at"))
    job_id = create_job(
        browser, "always-fails", handler="demo.fail", payload='{"times": 5, "permanent": true}', maxAttempts="1"
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
