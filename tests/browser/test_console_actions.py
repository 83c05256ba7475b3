"""The console's actions beyond create: edit (and its 409), run with a payload, backfill, dead letters and
their redrive, and the jobs list's server-side filters and paging, in headless Chromium against `duetime local`."""

from __future__ import annotations

import time
from typing import Any

from tests.browser.pages import (
    Api,
    css,
    fill,
    fits_a_phone,
    low_contrast_text,
    unlabelled_controls,
    visible_text,
    wait_for,
)

RUN_WAIT_SECONDS = 90
FAILED_RUNS = 3
HISTORY_PAGE = 20  # the console's page of executions
HISTORY_SLOTS = HISTORY_PAGE + 5  # a backfill of this many minutely slots fills more than one page


def cron_job(api: Api, name: str, **fields: Any) -> dict[str, Any]:
    spec = {"name": name, "handler": "demo.echo", "schedule": {"cron": "0 3 * * *", "timeZone": "UTC"}, **fields}
    job: dict[str, Any] = api.call("POST", "/jobs", spec, expect=201)
    return job


def open_job(browser: Any, local: Any, job: dict[str, Any]) -> None:
    browser.get(f"{local.console_link.split('#')[0]}#token={Api(local).token}")
    wait_for(browser, visible_text("h1", "Jobs"))
    browser.get(f"{local.base_url}/console/#/jobs/{job['jobId']}")
    wait_for(browser, visible_text("h1", job["name"]))


def job_rows(browser: Any) -> list[str] | None:
    """The names in the jobs list once its page is in (None while a filter's page is on its way), read in one
    script: the list may be drawn again between finding its rows and reading them one by one."""
    rows: list[str] | None = browser.execute_script(
        """const table = document.querySelector('#jobs');
        if (table.getAttribute('aria-busy')) return null;
        return [...table.querySelectorAll('tbody tr[data-job-id]')].map(r => r.innerText.trim().split(/\\s+/)[0]);"""
    )
    return rows


def field_error(browser: Any, field_id: str) -> str:
    wait_for(browser, lambda d: css(d, f"#{field_id}").get_attribute("aria-invalid") == "true")
    text: str = css(browser, f"#{field_id}-error").text
    assert text, f"#{field_id} is marked invalid with no message"
    return text


def set_backfill_range(browser: Any, start_ms: int, end_ms: int) -> None:
    """Types the instants into the backfill form's datetime-local fields, in the browser's own zone."""
    browser.execute_script(
        """const p = (n) => String(n).padStart(2, '0');
        const local = (ms) => { const d = new Date(ms); return `${d.getFullYear()}-${p(d.getMonth() + 1)}-` +
          `${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`; };
        document.getElementById('backfill-from').value = local(arguments[0]);
        document.getElementById('backfill-to').value = local(arguments[1]);""",
        start_ms,
        end_ms,
    )


def test_an_edit_saves_what_changed_and_a_change_made_meanwhile_is_a_clear_409(
    browser: Any, local: Any, screenshot: Any
) -> None:
    api = Api(local)
    job = cron_job(api, "editable-report", tags={"team": "ops"})
    open_job(browser, local, job)
    css(browser, "#edit").click()
    wait_for(browser, visible_text("h1", "Edit editable-report"))
    assert css(browser, "#f-cron").get_attribute("value") == "0 3 * * *"
    assert css(browser, "#f-tags").get_attribute("value") == "team=ops"
    assert unlabelled_controls(browser) == []
    assert low_contrast_text(browser) == []
    fill(browser, "#f-jitterSeconds", "99999")  # over the API's limit: refused, at the field
    css(browser, "#save").click()
    field_error(browser, "f-jitterSeconds")
    fill(browser, "#f-jitterSeconds", "30")
    fill(browser, "#f-cron", "15 4 * * *")
    fill(browser, "#f-tags", "team=ops, env=prod")
    # Someone else saves the job while this form is open: the form's version is stale.
    api.call("PATCH", f"/jobs/{job['jobId']}", {"version": job["version"], "name": "renamed-meanwhile"}, expect=200)
    css(browser, "#save").click()
    wait_for(browser, visible_text("#edit-conflict", "changed since you opened it"))
    screenshot(browser, "job-edit-conflict")
    css(browser, "#reload-edit").click()
    wait_for(browser, visible_text("#edit-version", f"version {job['version'] + 1}"))
    assert css(browser, "#f-name").get_attribute("value") == "renamed-meanwhile"
    fill(browser, "#f-cron", "15 4 * * *")
    fill(browser, "#f-jitterSeconds", "30")
    fill(browser, "#f-tags", "team=ops, env=prod")
    css(browser, "#save").click()
    wait_for(browser, visible_text("#notice", "Saved “renamed-meanwhile”"))
    notice = css(browser, "#notice").text
    assert notice.endswith("changed schedule, jitterSeconds, tags."), notice  # only what this form changed
    wait_for(browser, visible_text("#spec", "15 4 * * *"))
    assert "env=prod" in css(browser, "#spec-tags").text
    assert "up to 30 s" in css(browser, "#spec").text
    wait_for(browser, visible_text("#next-runs", "04:15"))
    saved = api.call("GET", f"/jobs/{job['jobId']}", expect=200)
    assert (saved["schedule"]["cron"], saved["jitterSeconds"], saved["tags"]) == (
        "15 4 * * *",
        30,
        {"team": "ops", "env": "prod"},
    )
    screenshot(browser, "job-edited")


def test_run_now_with_a_payload_shows_errors_at_the_field_and_runs_with_it(
    browser: Any, local: Any, screenshot: Any
) -> None:
    job = cron_job(Api(local), "payload-override", payload={"region": "IN"})
    open_job(browser, local, job)
    css(browser, "#run-payload-open").click()
    assert '"IN"' in css(browser, "#run-payload").get_attribute("value")  # the job's payload to start from
    from selenium.webdriver.common.keys import Keys

    css(browser, "#run-payload").send_keys(Keys.ESCAPE)  # the keyboard closes the form
    assert not browser.find_elements("css selector", "#run-payload-form")
    css(browser, "#run-payload-open").click()
    fill(browser, "#run-payload", "{not json")
    css(browser, "#confirm-run-payload").click()
    assert "not JSON" in field_error(browser, "run-payload")
    fill(browser, "#run-payload", '["an array"]')  # JSON, but not an object: the API names the field
    css(browser, "#confirm-run-payload").click()
    wait_for(
        browser, lambda d: "not JSON" not in css(d, "#run-payload-error").text and css(d, "#run-payload-error").text
    )
    screenshot(browser, "job-run-payload-error")
    fill(browser, "#run-payload", '{"region": "EU"}')
    css(browser, "#confirm-run-payload").click()
    wait_for(browser, visible_text("#notice", "Run now with your payload"))
    assert not browser.find_elements("css selector", "#run-payload-form")  # the form closed on success
    wait_for(browser, visible_text("#history", "succeeded"), RUN_WAIT_SECONDS)
    assert '"region":"EU"' in css(browser, "#history").text.replace(" ", "")  # demo.echo returns its payload
    assert '"IN"' in css(browser, "#job-payload").get_attribute("textContent")  # the job keeps its own


def test_backfill_runs_the_past_slots_once_and_says_what_it_did(browser: Any, local: Any, screenshot: Any) -> None:
    job = cron_job(Api(local), "hourly-backfill", schedule={"cron": "0 * * * *", "timeZone": "UTC"})
    open_job(browser, local, job)
    # [end - 3 h, end) with `end` a whole minute ago holds exactly three :00 slots, whatever the minute.
    end_ms = (int(time.time()) // 60 - 1) * 60_000
    start_ms = end_ms - 3 * 3_600_000
    css(browser, "#backfill").click()
    set_backfill_range(browser, start_ms, end_ms)
    screenshot(browser, "job-backfill-form")
    css(browser, "#confirm-backfill").click()
    wait_for(browser, visible_text("#notice", "Backfill of “hourly-backfill”"))
    assert "3 runs created, 0 there already" in css(browser, "#notice").text, css(browser, "#notice").text
    wait_for(browser, lambda d: len(d.find_elements("css selector", "#history tr[data-status=succeeded]")) == 3, 60)
    assert css(browser, "#history").text.count("backfill") == 3
    # The same range again creates nothing: every slot has its execution already.
    css(browser, "#backfill").click()
    set_backfill_range(browser, start_ms, end_ms)
    css(browser, "#confirm-backfill").click()
    wait_for(browser, visible_text("#notice", "0 runs created, 3 there already"))
    # A range ending in the future is refused at its field.
    css(browser, "#backfill").click()
    set_backfill_range(browser, start_ms, end_ms + 2 * 3_600_000)
    css(browser, "#confirm-backfill").click()
    assert "future" in field_error(browser, "backfill-to")
    screenshot(browser, "job-backfilled")


def test_dead_letters_retry_one_and_redrive_a_selection(browser: Any, local: Any, screenshot: Any) -> None:
    api = Api(local)
    # Each run's first attempt fails for good; a retry (attempt 2) succeeds.
    job = cron_job(
        api, "flaky-export", handler="demo.fail", payload={"times": 1, "permanent": True}, retry={"maxAttempts": 1}
    )
    for _ in range(FAILED_RUNS):
        api.call("POST", f"/jobs/{job['jobId']}/run", expect=201)
        time.sleep(0.05)  # run-now instants differ

    def failed_ids() -> list[str]:
        page = api.call("GET", f"/jobs/{job['jobId']}/executions?limit=20", expect=200)
        return [e["executionId"] for e in page["executions"] if e["status"] == "failed"]

    def dead_letter_ids() -> set[str]:
        page = api.call("GET", "/dead-letters?limit=100", expect=200)
        return {e["executionId"] for e in page["executions"]}

    # A failed run enters the dead letters once the DLQ's drain has told its owner (every few seconds locally).
    deadline = time.monotonic() + RUN_WAIT_SECONDS
    while time.monotonic() < deadline and not (
        len(failed_ids()) == FAILED_RUNS and set(failed_ids()) <= dead_letter_ids()
    ):
        time.sleep(0.5)
    ids = failed_ids()
    assert len(ids) == FAILED_RUNS and set(ids) <= dead_letter_ids(), ids
    open_job(browser, local, job)
    css(browser, "nav a[href='#/dead-letters']").click()
    wait_for(browser, visible_text("h1", "Dead letters"))
    wait_for(
        browser,
        lambda d: all(d.find_elements("css selector", f"#dead-letters tr[data-execution-id='{i}']") for i in ids),
    )
    assert "flaky-export" in css(browser, f"#dead-letters tr[data-execution-id='{ids[0]}']").text
    assert unlabelled_controls(browser) == []
    assert low_contrast_text(browser) == []
    screenshot(browser, "dead-letters")
    css(browser, f"#dead-letters button.retry[data-execution-id='{ids[0]}']").click()
    wait_for(browser, visible_text("#notice", f"Retried execution {ids[0]}"))
    wait_for(browser, lambda d: not d.find_elements("css selector", f"#dead-letters tr[data-execution-id='{ids[0]}']"))
    for execution_id in ids[1:]:
        css(browser, f"#dead-letters tr[data-execution-id='{execution_id}'] input.select").click()
    css(browser, "#redrive-selected").click()
    wait_for(browser, visible_text("#notice", f"Redrive: {FAILED_RUNS - 1} retried, 0 refused"))
    assert not any(browser.find_elements("css selector", f"#dead-letters tr[data-execution-id='{i}']") for i in ids)
    assert fits_a_phone(browser)
    browser.get(f"{local.base_url}/console/#/jobs/{job['jobId']}")
    wait_for(
        browser,
        lambda d: len(d.find_elements("css selector", "#history tr[data-status=succeeded]")) == FAILED_RUNS,
        RUN_WAIT_SECONDS,
    )


def test_the_jobs_list_filters_by_tag_status_and_handler_on_the_server_and_pages(
    browser: Any, local: Any, screenshot: Any
) -> None:
    api = Api(local)
    page_size = 20
    for n in range(page_size + 1):
        cron_job(api, f"batch-{n:02d}", tags={"batch": "paging"}, handler="demo.sleep" if n == 0 else "demo.echo")
    paused = cron_job(api, "batch-paused", tags={"batch": "paging"})
    api.call("PATCH", f"/jobs/{paused['jobId']}", {"status": "paused", "note": "held"}, expect=200)
    open_job(browser, local, paused)
    css(browser, "nav a[href='#/jobs']").click()
    wait_for(browser, visible_text("h1", "Jobs"))
    fill(browser, "#tag-filter", "batch:paging")
    wait_for(browser, lambda d: job_rows(d) is not None and len(job_rows(d) or []) == page_size)
    assert "tag=batch%3Apaging" in browser.current_url  # the filter is in the address: a reload keeps it
    css(browser, "#jobs-next").click()
    wait_for(browser, visible_text("#jobs-summary", "page 2 (last)"))
    assert job_rows(browser) == ["batch-01", "batch-00"]  # newest first: the two oldest on page 2
    css(browser, "#jobs-previous").click()
    wait_for(browser, visible_text("#jobs-summary", "page 1"))
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#status-filter")).select_by_value("paused")
    wait_for(browser, lambda d: job_rows(d) == ["batch-paused"])
    assert "held" in css(browser, "#jobs tbody tr[data-job-id]").text  # a paused job's note, in the list
    Select(css(browser, "#status-filter")).select_by_value("all")
    fill(browser, "#handler-filter", "demo.sleep")
    wait_for(browser, lambda d: job_rows(d) == ["batch-00"])
    screenshot(browser, "jobs-filtered")
    fill(browser, "#tag-filter", "no-colon")  # the API refuses a tag that is not key:value, naming the field
    field_error(browser, "tag-filter")
    assert fits_a_phone(browser)


def test_an_auto_paused_job_shows_why_on_its_page(browser: Any, local: Any, screenshot: Any) -> None:
    api = Api(local)
    job = cron_job(
        api,
        "pauses-itself",
        handler="demo.fail",
        payload={"times": 1, "permanent": True},
        retry={"maxAttempts": 1},
        pauseAfterFailures=1,
    )
    open_job(browser, local, job)
    css(browser, "#run-now").click()
    wait_for(browser, visible_text("#job-status", "paused"), RUN_WAIT_SECONDS)  # polled: no reload
    wait_for(browser, visible_text("#job-note", "paused after 1 consecutive failed runs"))
    assert "after 1 failures in a row" in css(browser, "#spec").text
    wait_for(browser, visible_text("#health", "PermanentFailure"))  # the last failure, with its error
    assert browser.find_elements("css selector", "#resume")
    assert low_contrast_text(browser) == []  # the job page: badges, note, health, history
    screenshot(browser, "job-auto-paused")


def test_the_execution_history_pages_older_and_newer(browser: Any, local: Any) -> None:
    api = Api(local)
    job = cron_job(api, "minutely-history", schedule={"cron": "* * * * *", "timeZone": "UTC"})
    end_s = (int(time.time()) // 60 - 1) * 60
    start_s = end_s - HISTORY_SLOTS * 60
    iso = "%Y-%m-%dT%H:%M:%SZ"
    done = api.call(
        "POST",
        f"/jobs/{job['jobId']}/backfill",
        {"from": time.strftime(iso, time.gmtime(start_s)), "to": time.strftime(iso, time.gmtime(end_s))},
        expect=200,
    )
    assert done["created"] == HISTORY_SLOTS, done
    open_job(browser, local, job)
    wait_for(browser, lambda d: len(d.find_elements("css selector", "#history tr[data-execution-id]")) == HISTORY_PAGE)
    newest = css(browser, "#history tr[data-execution-id]").get_attribute("data-execution-id")
    css(browser, "#history-older").click()
    wait_for(browser, visible_text("#history-page", "page 2"))
    older = [
        r.get_attribute("data-execution-id")
        for r in browser.find_elements("css selector", "#history tr[data-execution-id]")
    ]
    assert older and newest not in older
    css(browser, "#history-newer").click()
    wait_for(browser, visible_text("#history-page", "page 1"))
    assert css(browser, "#history tr[data-execution-id]").get_attribute("data-execution-id") == newest
