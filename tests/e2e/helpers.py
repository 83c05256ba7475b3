"""Helpers for end-to-end tests: submit jobs, wait for executions to reach a state."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.local.backends import DEFAULT_BACKEND, MOTO
from duetime.local.system import LocalSystem

# The backend `duetime local` runs the e2e suite on (`make test` runs the suite once per backend).
E2E_BACKEND = os.environ.get("DUETIME_E2E_BACKEND", DEFAULT_BACKEND)


# What the in-process `duetime local` prints meanwhile: on moto its emulated Lambda functions log and emit
# metrics as one-line JSON (as on AWS) to the stdout a CLI command run in the same process writes to.
SYSTEM_LINES = ('{"_aws"', '{"level"')


def command_output(capsys: Any) -> tuple[str, str]:
    """(stdout, stderr) of a `duetime` command run in this process, without the system's lines beside it."""
    out, err = capsys.readouterr()
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith(SYSTEM_LINES)), err


def new_local_system(data_dir: str | Path, **options: Any) -> LocalSystem:
    """A `duetime local` on the e2e backend (not started). On moto its functions run as `duetime local --backend
    moto` runs them: each a process from the cloud assembly (its asset, its layers and the runtime's boto3 on the
    path, the template's environment) calling as its role, every call checked against the role's policies."""
    options.setdefault("function_processes", E2E_BACKEND == MOTO)
    return LocalSystem(data_dir, backend=E2E_BACKEND, **options)


def iso_in(seconds: float) -> str:
    at = datetime.now(UTC) + timedelta(seconds=seconds)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.25, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def executions(api: Any, job_id: str) -> list[dict[str, Any]]:
    response = api.get(f"/jobs/{job_id}/executions", params={"limit": 100})
    assert response.status_code == 200, response.text
    return list(response.json()["executions"])


def wait_terminal(api: Any, job_id: str, timeout: float = 30, count: int = 1) -> list[dict[str, Any]]:
    terminal = {"succeeded", "failed", "cancelled", "skipped"}

    def done() -> list[dict[str, Any]] | None:
        found = [e for e in executions(api, job_id) if e["status"] in terminal]
        return found if len(found) >= count else None

    return list(wait_for(done, timeout, what=f"{count} terminal execution(s) of {job_id}"))


def submit(api: Any, **body: Any) -> dict[str, Any]:
    body.setdefault("name", "test")
    response = api.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())
