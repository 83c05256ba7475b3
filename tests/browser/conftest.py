"""Browser fixtures: a real `duetime local` process and headless Chromium (Debian's) driven by Selenium."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(__file__).parent / "screenshots"
# scripts/browser.sh installs these from Debian's packages; Selenium's own browser download is never used.
CHROMIUM = os.environ.get("DUETIME_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DUETIME_CHROMEDRIVER", "/usr/bin/chromedriver")
START_TIMEOUT_SECONDS = 60
WINDOW_WIDTH, WINDOW_HEIGHT = 1280, 900
MAX_SCREENSHOT_HEIGHT = 4000


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: run ./scripts/bootstrap.sh"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"no {path}: run scripts/browser.sh (installs Debian's chromium and chromium-driver with apt-get)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = _browser_missing()
    if missing:
        skip = pytest.mark.skip(reason=f"browser tests skipped: {missing}")
        for item in items:
            if "tests/browser" in str(item.fspath):
                item.add_marker(skip)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalProcess:
    """`duetime local` in a process of its own, as a user starts it; `console_link` is its printed sign-in link."""

    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        self.log = data_dir / "local.log"
        command = [sys.executable, "-m", "duetime.cli", "local", "--port", str(self.port), "--data-dir", str(data_dir)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "core" / "python")}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=data_dir)
        self.console_link = self._wait_for_link()

    def _wait_for_link(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            found = re.search(r"console: (\S+)", self.log.read_text())
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"duetime local printed no console link:\n{self.log.read_text()}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# How much of `duetime local`'s log a failed test's report shows (the whole log is saved beside the screenshots).
LOG_TAIL_LINES = 150


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed browser test keeps the log of the `duetime local` it ran against: its tail (and every
    traceback in it) in the report, the whole log as tests/browser/screenshots/<test>.local.log. A server
    error the page only shows as "internal error" then names its exception."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    local = getattr(item, "funcargs", {}).get("local")
    if not report.failed or not isinstance(local, LocalProcess) or not local.log.exists():
        return
    text = local.log.read_text(errors="replace")
    SCREENSHOTS.mkdir(exist_ok=True)
    saved = SCREENSHOTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name) + ".local.log")
    saved.write_text(text)
    lines = text.splitlines()
    tracebacks = [n for n, line in enumerate(lines) if line.startswith("Traceback")]
    shown = lines[-LOG_TAIL_LINES:]
    if tracebacks and tracebacks[0] < len(lines) - LOG_TAIL_LINES:
        first = tracebacks[0]
        shown = [*lines[max(0, first - 5) : first + 40], "...", *shown]
    report.sections.append((f"duetime local log (whole: {saved})", "\n".join(shown)))


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalProcess]:
    if _browser_missing():
        pytest.skip(_browser_missing() or "")
    process = LocalProcess(tmp_path_factory.mktemp("console-local"))
    yield process
    process.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: Chromium will not start its sandbox as root, and CI runs as root.
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW_WIDTH},{WINDOW_HEIGHT}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, CSP violations included
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def screenshot() -> Callable[..., Path]:
    """Saves the whole page (not just the window) as tests/browser/screenshots/NAME.png, which git ignores."""
    SCREENSHOTS.mkdir(exist_ok=True)

    def save(driver: Any, name: str, width: int = WINDOW_WIDTH) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        driver.set_window_size(width, WINDOW_HEIGHT)
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(width, min(max(height, WINDOW_HEIGHT), MAX_SCREENSHOT_HEIGHT))
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(path))
        driver.set_window_size(WINDOW_WIDTH, WINDOW_HEIGHT)
        return path

    return save


@pytest.fixture(autouse=True)
def page_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each browser test: no script error and no Content-Security-Policy violation in the page's console."""
    yield
    if "browser" not in request.fixturenames:
        return
    driver = request.getfixturevalue("browser")
    entries = driver.get_log("browser")  # reading empties the buffer: each test sees its own
    problems = [
        e["message"]
        for e in entries
        if e["level"] == "SEVERE" and ("Content Security Policy" in e["message"] or "Uncaught" in e["message"])
    ]
    assert problems == [], problems
