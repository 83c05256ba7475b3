"""End to end over `duetime local`: delivery per job (issue 34). An at-most-once job has no retries, a run
of it that failed is never started again (its retry is 409 naming `delivery`), and a retry policy of more
than one attempt beside it is 400 naming `retry.maxAttempts`."""

from __future__ import annotations

import json
import secrets

from duetime.cli.main import main

from tests.e2e.helpers import command_output, iso_in, submit, wait_terminal


def test_an_at_most_once_job_fails_after_one_attempt_and_is_never_retried(api):
    refused = api.post(
        "/jobs",
        json={
            "name": "pay",
            "handler": "demo.echo",
            "schedule": {"at": iso_in(60)},
            "delivery": "at-most-once",
            "retry": {"maxAttempts": 3},
        },
    )
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "retry.maxAttempts"
    bad = api.post(
        "/jobs", json={"name": "pay", "handler": "demo.echo", "schedule": {"at": iso_in(60)}, "delivery": "twice"}
    )
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "delivery"
    # A handler that fails its first three attempts: at-most-once, its first failure ends the run
    job = submit(api, handler="demo.fail", payload={"times": 3}, schedule={"at": iso_in(1)}, delivery="at-most-once")
    assert job["delivery"] == "at-most-once" and job["retry"]["maxAttempts"] == 1
    assert api.get(f"/jobs/{job['jobId']}").json()["delivery"] == "at-most-once"
    [execution] = wait_terminal(api, job["jobId"], timeout=30)
    assert execution["status"] == "failed" and execution["attempt"] == 1
    retried = api.post(f"/executions/{execution['executionId']}/retry")
    assert retried.status_code == 409 and retried.json()["error"]["field"] == "delivery"
    # The default is at-least-once
    plain = submit(api, handler="demo.echo", schedule={"at": iso_in(60)})
    assert plain["delivery"] == "at-least-once"


def test_the_cli_creates_an_at_most_once_job_with_a_budget_and_shows_both(local_system, capsys):
    owner = f"cli-{secrets.token_hex(3)}"
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner]
    argv = [
        "jobs",
        "create",
        "--name",
        "n",
        "--handler",
        "demo.echo",
        "--cron",
        "0 2 * * *",
        "--delivery",
        "at-most-once",
        "--late-after",
        "120",
    ]
    assert main([*argv, "--json", *conn]) == 0
    job = json.loads(command_output(capsys)[0])
    assert job["delivery"] == "at-most-once" and job["retry"]["maxAttempts"] == 1
    assert job["lateAfterSeconds"] == 120
    assert main(["jobs", "get", job["jobId"], *conn]) == 0
    shown = command_output(capsys)[0]
    assert "at-most-once" in shown and "lateAfterSeconds" in shown
    assert "7 d - (0 late of 0), 30 d - (0 late of 0)" in shown
