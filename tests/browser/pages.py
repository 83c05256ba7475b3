"""What the browser tests share: waiting on the page, finding and filling fields, the job form, the API beside it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

WAIT_SECONDS = 30
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


class Api:
    """The public API beside the page, as curl would call it: the same local token the console link carries."""

    def __init__(self, local: Any) -> None:
        self.base_url = local.base_url
        self.token = unquote(local.console_link.split("#token=", 1)[1])

    def call(self, method: str, path: str, body: Any = None, expect: int | None = None) -> Any:
        import requests

        response = requests.request(
            method, f"{self.base_url}{path}", json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )
        if expect is not None:
            assert response.status_code == expect, (response.status_code, response.text)
        return response.json() if response.text else None


def fits_a_phone(browser: Any) -> bool:
    """At a phone's width the page does not scroll sideways (wide tables scroll inside their own box)."""
    browser.set_window_size(PHONE_WIDTH, 800)
    try:
        return int(browser.execute_script("return document.documentElement.scrollWidth")) <= PHONE_WIDTH
    finally:
        browser.set_window_size(1280, 900)
