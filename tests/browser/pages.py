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
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        # An element the page drew again while the condition read it: look again at the next poll.
        stale = [StaleElementReferenceException]
        waiting = WebDriverWait(driver, seconds, poll_frequency=0.2, ignored_exceptions=stale)
        return waiting.until(condition)
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
        # The resize reaches the page a frame or more later on a loaded machine: measured at once, the page was
        # once still 1280 wide. Measure when the viewport has the phone's width and that layout has been drawn.
        wait_for(browser, lambda b: int(b.execute_script("return window.innerWidth")) <= PHONE_WIDTH)
        browser.execute_async_script("requestAnimationFrame(() => requestAnimationFrame(arguments[0]))")
        return int(browser.execute_script("return document.documentElement.scrollWidth")) <= PHONE_WIDTH
    finally:
        browser.set_window_size(1280, 900)


# WCAG 2 contrast of every visible piece of text against the background it is drawn on: 4.5:1, or 3:1 for
# large text (24px, or 18.66px bold). Disabled controls are exempt, as WCAG exempts them.
CONTRAST_SCRIPT = """
const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
const lum = ([r, g, b]) => {
  const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
};
const background = (node) => {
  for (let n = node; n; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
const low = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let t = walker.nextNode(); t; t = walker.nextNode()) {
  const el = t.parentElement;
  if (!t.textContent.trim() || !el || !el.getClientRects().length) continue;
  if (el.closest('[disabled], svg, .skip, [hidden]')) continue;
  const style = getComputedStyle(el);
  if (style.visibility === 'hidden') continue;
  const a = lum(rgb(style.color)) + 0.05;
  const b = lum(background(el)) + 0.05;
  const ratio = Math.max(a, b) / Math.min(a, b);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  if (ratio < (large ? 3 : 4.5)) low.push(`${ratio.toFixed(2)}: ${el.tagName} ${t.textContent.trim().slice(0, 40)}`);
}
return low;
"""


def low_contrast_text(browser: Any) -> list[str]:
    """The visible text on the page below WCAG AA contrast, each as 'ratio: TAG text'."""
    return list(browser.execute_script(CONTRAST_SCRIPT))
