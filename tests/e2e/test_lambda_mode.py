"""`duetime local --backend moto` runs the real handler modules under functions/ as Lambda would: their
Powertools JSON log lines name each function's service, and each invocation has its own request id."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from duetime.client import DuetimeClient
from duetime.local.lambda_process import ProcessFunction
from duetime.local.system import LocalSystem

from tests.e2e.helpers import E2E_BACKEND, iso_in, submit, wait_for, wait_terminal
from tests.http_client import Api

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(E2E_BACKEND != "moto", reason="the Lambda emulation is the moto backend's")


class Console:
    """A `duetime local` process whose output is read line by line."""

    def __init__(self, data_dir: str) -> None:
        command = [sys.executable, "-m", "duetime.cli", "local", "--backend", "moto", "--port", "0"]
        command += ["--data-dir", data_dir, "--workers", "2", "--lease-seconds", "6", "--shards", "2"]
        # Powertools' own setting (it can be set on a deployed function too): log each invocation's event.
        env = {**os.environ, "POWERTOOLS_LOGGER_LOG_EVENT": "true", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def value(self, label: str) -> str | None:
        found = [line.split(":", 1)[1].strip() for line in list(self.lines) if line.strip().startswith(label)]
        return found[0] if found else None

    def records(self, service: str) -> list[dict[str, Any]]:
        found = []
        for line in list(self.lines):
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("service") == service:
                    found.append(record)
        return found

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


def test_the_moto_backend_runs_the_real_handlers_each_invocation_with_its_own_request_id(tmp_path):
    console = Console(str(tmp_path / "data"))
    try:
        url = wait_for(lambda: console.value("API:"), timeout=60, what="duetime local to start")
        token = wait_for(lambda: console.value("token:"), timeout=5, what="the token")
        api = Api(url, token)
        # A job that fails once, with one attempt: the worker runs it, the DLQ notifier tells the owner
        job = submit(
            api, handler="demo.fail", payload={"times": 1}, schedule={"at": iso_in(2)}, retry={"maxAttempts": 1}
        )
        [execution] = wait_terminal(api, job["jobId"], timeout=30)
        assert execution["status"] == "failed"

        def told() -> list[dict[str, Any]]:
            return [r for r in console.records("duetime-dlq-notifier") if r.get("handled", {}).get("default") == 1]

        [drained] = wait_for(told, timeout=20, what="the DLQ notifier to handle the dead letter")

        def two_ticks() -> list[dict[str, Any]] | None:
            ticks = [r for r in console.records("duetime-preloader") if r.get("message") == "pre-load cycle"]
            return ticks[:2] if len(ticks) >= 2 else None

        ticks = wait_for(two_ticks, timeout=20, what="two pre-loader ticks")
    finally:
        assert console.stop() == 0
    # The pre-loader: its own function, a fresh request id per tick, its report under a key of its own
    assert {t["function_name"] for t in ticks} == {"duetime-preloader"}
    assert len({t["function_request_id"] for t in ticks}) == 2
    assert set(ticks[0]["cycle"]) >= {"sent", "created", "skipped"}
    # The worker: invoked by the SQS event source with a batch holding the job's message
    batches = [r for r in console.records("duetime-worker") if isinstance(r["message"], dict)]
    ours = [b for b in batches if any(execution["executionId"] in rec["body"] for rec in b["message"]["Records"])]
    assert ours and ours[0]["function_name"] == "duetime-worker-default"
    record = ours[0]["message"]["Records"][0]
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"].endswith(":duetime-due-default")
    assert int(record["attributes"]["ApproximateReceiveCount"]) >= 1
    # The DLQ notifier and the API: their own functions and request ids
    assert drained["function_name"] == "duetime-dlq-notifier"
    api_calls = console.records("duetime-api")
    assert any(c["message"].get("path") == "/jobs" and c["message"].get("httpMethod") == "POST" for c in api_calls)
    request_ids = [r["function_request_id"] for r in [*ticks, *ours, drained, *api_calls]]
    assert len(request_ids) == len(set(request_ids))


def test_the_session_system_runs_each_function_from_its_directory_under_functions_as_the_assembly_ships_it(
    local_system: LocalSystem,
):
    """The e2e session's `duetime local --backend moto` runs each function as a process whose path starts at the
    function's asset in the cloud assembly: that asset's handler is the file under functions/."""

    def started() -> dict[str, Any] | None:
        running = {name: f for name, f in local_system.functions.items() if f.instances}
        wanted = ("api", "preloader", "dlq-notifier")
        return running if all(f"duetime-{name}" in running for name in wanted) else None

    functions = wait_for(started, timeout=15, what="the scheduled functions to have run")
    for name, function in functions.items():
        assert isinstance(function, ProcessFunction), name
        directory = name.removeprefix("duetime-").replace("-", "_").removesuffix("_default")
        asset = function.deployed.asset
        assert function.lambda_path.path[0] == str(asset), (name, function.lambda_path.path)
        module, _, _ = function.deployed.handler.partition(".")
        assert (asset / f"{module}.py").read_bytes() == (ROOT / "functions" / directory / "index.py").read_bytes()


def test_runs_due_in_the_same_second_reach_the_worker_function_together_and_each_runs_once(local_system: LocalSystem):
    """A batch of one-offs due at one instant is sent ten runs to a message (adapters/aws/carriers.py): the
    worker function, run from its asset as on AWS, unpacks each record and runs every run once."""
    client = DuetimeClient.connect(None, None, local_system.data_dir, f"carried-{secrets.token_hex(3)}")
    at = iso_in(3)
    specs = [{"name": f"c{n}", "handler": "demo.echo", "schedule": {"at": at}, "payload": {"n": n}} for n in range(25)]
    results = client.create_jobs(specs)
    assert [r["status"] for r in results] == [201] * 25
    ids = [r["job"]["jobId"] for r in results]

    def all_ended() -> bool:
        return all(client.request("GET", f"/jobs/{job_id}")["status"] == "completed" for job_id in ids)

    wait_for(all_ended, 60, what="the carried one-offs to run and complete")
    for n, job_id in enumerate(ids):
        [run] = client.request("GET", f"/jobs/{job_id}/executions")["executions"]
        assert run["status"] == "succeeded" and run["attempt"] == 1 and run["result"] == {"n": n}
        assert run["workerId"].startswith("lambda-")
