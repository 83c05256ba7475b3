"""The console's create form and job page for delivery per job (issue 34): at-most-once sets one attempt,
and the job page says the job never starts a slot twice."""

from __future__ import annotations

from typing import Any

from tests.browser.pages import Api, create_job, css, fill, open_new_job_form, signed_in, unlabelled_controls


def test_an_at_most_once_job_is_created_with_one_attempt_and_its_page_says_so(browser: Any, local: Any) -> None:
    from selenium.webdriver.support.ui import Select

    signed_in(browser, local)
    open_new_job_form(browser)
    fill(browser, "#f-cron", "0 6 * * *")
    Select(css(browser, "#f-delivery")).select_by_value("at-most-once")
    assert css(browser, "#f-maxAttempts").get_attribute("value") == "1"
    assert unlabelled_controls(browser) == []
    job_id = create_job(browser, "payment-file")
    assert "at-most-once" in css(browser, "#spec-delivery").text
    job = Api(local).call("GET", f"/jobs/{job_id}", expect=200)
    assert job["delivery"] == "at-most-once" and job["retry"]["maxAttempts"] == 1
