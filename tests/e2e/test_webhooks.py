"""Webhook jobs over `duetime local`'s HTTP API: a real receiver on 127.0.0.1, configured with the secret
`duetime webhook-secret` prints, verifies every request with the snippet of docs/handlers.md; forbidden
targets get 400."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import iso_in, submit, wait_terminal
from tests.http_client import Api
from tests.webhook_receiver import Answer, receiver

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def printed_secret(data_dir: Path, owner: str) -> str:
    """The owner's secret as an operator gets it: the installed command, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "core" / "python")}
    command = [sys.executable, "-m", "duetime.cli", "webhook-secret", "--owner", owner, "--data-dir", str(data_dir)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_webhook_job_retries_a_500_and_succeeds_with_verified_requests(local_system):
    owner = f"hook-{secrets.token_hex(3)}"
    api = Api(local_system.api_url, local_system.token(owner))
    secret = printed_secret(local_system.data_dir, owner)  # the receiver is configured before the first run
    with receiver(lambda _: secret, [Answer(500, b"try later"), Answer(200, b'{"sent": 12}')]) as hook:
        job = submit(
            api,
            handler=hook.url,
            payload={"batch": 7},
            schedule={"at": iso_in(1)},
            retry={"maxAttempts": 3, "baseDelaySeconds": 1, "maxDelaySeconds": 1},
        )
        [execution] = wait_terminal(api, job["jobId"], timeout=60)
    assert execution["status"] == "succeeded" and execution["attempt"] == 2, execution
    assert execution["result"] == {"sent": 12}
    assert [r.verified for r in hook.requests] == [True, True]
    assert {r.headers["Idempotency-Key"] for r in hook.requests} == {execution["executionId"]}
    assert hook.requests[0].json["owner"] == owner and hook.requests[0].json["payload"] == {"batch": 7}


def test_a_404_fails_the_webhook_job_after_one_attempt(api):
    with receiver(lambda _: "", [Answer(404, b"gone")]) as hook:
        job = submit(api, handler=hook.url, schedule={"at": iso_in(1)}, retry={"maxAttempts": 3})
        [execution] = wait_terminal(api, job["jobId"], timeout=60)
    assert execution["status"] == "failed" and execution["attempt"] == 1, execution
    assert "HTTP 404" in execution["error"] and len(hook.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/",
        "https://10.0.0.8/hook",
        "https://[fd12::1]/hook",
        "ftp://hooks.example.com/hook",
        "http://hooks.example.com/hook",
        "https://user:pw@hooks.example.com/hook",
        "https://",
    ],
)
def test_a_forbidden_or_malformed_target_is_refused_with_400_naming_handler(api, url):
    response = api.post("/jobs", json={"name": "bad", "handler": url, "schedule": {"at": iso_in(60)}})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == "handler"
