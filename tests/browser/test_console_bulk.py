"""The console's bulk actions on the jobs list (the selected rows, or all jobs the filters match after a dry
run says how many) and the New job form's DST policy selects, in headless Chromium against `duetime local`."""

from __future__ import annotations

import secrets
from typing import Any

from tests.browser.pages import (
    Api,
    css,
    fill,
    fits_a_phone,
    open_new_job_form,
    signed_in,
    unlabelled_controls,
    visible_text,
    wait_for,
)


def cron_job(api: Api, name: str, tags: dict[str, str]) -> str:
    spec = {"name": name, "handler": "demo.echo", "schedule": {"cron": "0 3 * * *"}, "tags": tags}
    return str(api.call("POST", "/jobs", spec, expect=201)["jobId"])


def statuses(api: Api, job_ids: list[str]) -> list[str]:
    return [api.call("GET", f"/jobs/{job_id}", expect=200)["status"] for job_id in job_ids]


def test_the_jobs_list_pauses_the_selected_jobs_and_cancels_all_matching(
    browser: Any, local: Any, screenshot: Any
) -> None:
    api = Api(local)
    team = f"t{secrets.token_hex(3)}"
    jobs = [cron_job(api, f"bulk-{team}-{n}", {"team": team}) for n in range(3)]
    outsider = cron_job(api, f"other-{team}", {"team": "other"})  # so only the filter's page holds 3 rows
    signed_in(browser, local)
    fill(browser, "#tag-filter", f"team:{team}")
    # The filter's page is in (the list is busy from the first key typed until then): its rows stay put
    wait_for(
        browser,
        lambda d: (
            d.execute_script(
                "const t = document.querySelector('#jobs');"
                "return !t.getAttribute('aria-busy') && t.querySelectorAll('tbody tr[data-job-id]').length;"
            )
            == 3
        ),
    )
    assert unlabelled_controls(browser) == []
    # The selected rows, by id
    for job_id in jobs[:2]:
        css(browser, f"#jobs tr[data-job-id='{job_id}'] input.select").click()
    css(browser, "#bulk-pause").click()
    wait_for(browser, visible_text("#notice", "Paused 2 jobs, 0 failed."))
    assert statuses(api, jobs) == ["paused", "paused", "active"]
    wait_for(browser, visible_text(f"#jobs tr[data-job-id='{jobs[0]}']", "paused"))
    # All matching the filters: a dry run asks first, and nothing changes until it is confirmed
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#bulk-scope")).select_by_value("matching")
    css(browser, "#bulk-cancel").click()
    wait_for(browser, visible_text("#bulk-question", "Cancel 3 jobs matching the filters"))
    screenshot(browser, "jobs-bulk-confirm")
    assert statuses(api, jobs) == ["paused", "paused", "active"]
    css(browser, "#bulk-confirm").click()
    wait_for(browser, visible_text("#notice", "Cancelled 3 jobs, 0 failed."))
    assert statuses(api, jobs) == ["cancelled"] * 3 and statuses(api, [outsider]) == ["active"]
    # Nothing is left to cancel: said, and no question asked
    css(browser, "#bulk-cancel").click()
    wait_for(browser, visible_text("#notice", "No job matching the filters would be cancelled."))
    assert fits_a_phone(browser)


def test_the_new_job_form_sets_a_dst_policy_and_its_preview_shows_it(browser: Any, local: Any) -> None:
    signed_in(browser, local)
    open_new_job_form(browser)
    # 02:30 on March 14: in New York the clock skips 02:00-03:00 that day in 2027, not in 2028
    fill(browser, "#f-cron", "30 2 14 3 *")
    fill(browser, "#f-timeZone", "America/New_York")

    def runs(driver: Any) -> list[str]:
        return [li.get_attribute("data-run") for li in driver.find_elements("css selector", "#preview li[data-run]")]

    # By default a fixed time in the gap runs when the gap ends, 03:00 EDT
    wait_for(browser, lambda d: runs(d)[:2] == ["2027-03-14T07:00:00.000Z", "2028-03-14T06:30:00.000Z"])
    # Beside the runs, what the schedule comes to: once a year here (March 14, the next in 2027), and on a round minute
    wait_for(browser, visible_text("#forecast", "About 0 runs a day, 0.08 a month: under $0.01 a month on AWS"))
    assert "a jitter of 60 s would spread them" in css(browser, "#forecast").text
    fill(browser, "#f-jitterSeconds", "30")  # spread already: no suggestion
    wait_for(browser, lambda d: "jitter of" not in css(d, "#forecast").text)
    fill(browser, "#f-jitterSeconds", "0")
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#f-dstGap")).select_by_value("skip")
    wait_for(browser, lambda d: runs(d)[:2] == ["2028-03-14T06:30:00.000Z", "2029-03-14T06:30:00.000Z"])
    Select(css(browser, "#f-dstFold")).select_by_value("both")
    assert unlabelled_controls(browser) == []
    fill(browser, "#f-name", "dst-policy")
    css(browser, "#create").click()
    wait_for(browser, visible_text("h1", "dst-policy"))
    job_id = browser.current_url.rsplit("/", 1)[1]
    job = Api(local).call("GET", f"/jobs/{job_id}", expect=200)
    assert job["schedule"]["dst"] == {"gap": "skip", "fold": "both"}
    # The policy is kept by an edit form that changes something else, and shown there
    browser.get(f"{local.base_url}/console/#/jobs/{job_id}/edit")
    wait_for(browser, visible_text("h1", "Edit dst-policy"))
    assert css(browser, "#f-dstGap").get_attribute("value") == "skip"
    assert css(browser, "#f-dstFold").get_attribute("value") == "both"
