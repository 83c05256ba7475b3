"""Operating jobs over `duetime local`, through the `duetime` client CLI and HTTP: tags and filtered lists,
run-now with a payload the handler receives, notes on pause and resume, schedule health, a bounded schedule
that ends `completed`, and a job paused after its runs failed."""

from __future__ import annotations

import json
import secrets
from typing import Any

from duetime.cli.main import main

from tests.e2e.helpers import command_output, iso_in, wait_for, wait_terminal


def cli(capsys: Any, *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out, err = command_output(capsys)
    return code, json.loads(out) if code == 0 and out.strip() else err


def test_tags_filters_run_now_payload_notes_and_health_through_the_cli(local_system, capsys):
    owner = f"ops-{secrets.token_hex(3)}"
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner, "--json"]
    create = ["jobs", "create", "--handler", "demo.echo", "--cron", "0 3 * * *", *conn]
    code, billing = cli(capsys, *create, "--name", "invoices", "--tag", "team:billing", "--jitter", "600")
    assert code == 0 and billing["tags"] == {"team": "billing"} and billing["jitterSeconds"] == 600
    code, search = cli(capsys, *create, "--name", "reindex", "--tag", "team:search", "--payload", '{"k": 1}')
    assert code == 0
    # Filtered lists, server-side
    code, page = cli(capsys, "jobs", "list", "--tag", "team:billing", *conn)
    assert code == 0 and [j["name"] for j in page["jobs"]] == ["invoices"]
    code, page = cli(capsys, "jobs", "list", "--all", "--handler", "demo.echo", "--status", "active", *conn)
    assert code == 0 and {j["name"] for j in page["jobs"]} == {"invoices", "reindex"}
    # Run now with a payload: the handler (demo.echo returns its payload) receives the override
    code, manual = cli(capsys, "jobs", "run", search["jobId"], "--payload", '{"k": 2, "why": "hotfix"}', *conn)
    assert code == 0 and manual["payload"] == {"k": 2, "why": "hotfix"}

    def ran() -> dict[str, Any] | None:
        _, page = cli(capsys, "executions", search["jobId"], *conn)
        found = [e for e in page["executions"] if e["executionId"] == manual["executionId"]]
        return found[0] if found and found[0]["status"] == "succeeded" else None

    done = wait_for(ran, 30, what="the run-now execution to succeed")
    assert done["result"] == {"k": 2, "why": "hotfix"}
    # Health on the job: the run-now is its last run and last success
    code, shown = cli(capsys, "jobs", "get", search["jobId"], *conn)
    assert code == 0 and shown["lastRun"]["executionId"] == manual["executionId"]
    assert shown["lastSuccess"]["executionId"] == manual["executionId"] and shown["lastFailure"] is None
    assert shown["pastDue"] is None and shown["payload"] == {"k": 1}
    # Notes on pause and resume
    code, paused = cli(capsys, "jobs", "pause", billing["jobId"], "--note", "quarter close", *conn)
    assert code == 0 and (paused["status"], paused["note"]) == ("paused", "quarter close")
    code, page = cli(capsys, "jobs", "list", "--status", "paused", *conn)
    assert [j["jobId"] for j in page["jobs"]] == [billing["jobId"]]
    code, resumed = cli(capsys, "jobs", "resume", billing["jobId"], "--note", "reopened", *conn)
    assert code == 0 and (resumed["status"], resumed["note"]) == ("active", "reopened")
    # The table view shows the health lines too
    assert main(["jobs", "get", search["jobId"], *conn[:-1]]) == 0
    assert "lastSuccess" in command_output(capsys)[0]


def test_a_bounded_job_completes_and_a_failing_one_pauses_itself(api):
    # An interval job with one run allowed: it runs at startAt, then the job is completed
    bounded = api.post(
        "/jobs",
        json={
            "name": "once-more",
            "handler": "demo.echo",
            "schedule": {"every": "1m", "startAt": iso_in(2), "maxRuns": 1},
        },
    ).json()
    # A job that fails every run, paused after the first failure
    failing = api.post(
        "/jobs",
        json={
            "name": "flaky",
            "handler": "demo.fail",
            "payload": {"times": 100, "permanent": True},
            "retry": {"maxAttempts": 1},
            "pauseAfterFailures": 1,
            "schedule": {"every": "1m", "startAt": iso_in(2)},
        },
    ).json()
    [run] = wait_terminal(api, bounded["jobId"], timeout=40)
    assert run["status"] == "succeeded" and run["runNumber"] == 1
    job = wait_for(
        lambda: (j := api.get(f"/jobs/{bounded['jobId']}").json())["status"] == "completed" and j,
        20,
        what="the bounded job to complete",
    )
    assert job["lastSuccess"]["executionId"] == run["executionId"] and job["nextRunAt"] is None
    [failed] = wait_terminal(api, failing["jobId"], timeout=40)
    assert failed["status"] == "failed"
    paused = wait_for(
        lambda: (j := api.get(f"/jobs/{failing['jobId']}").json())["status"] == "paused" and j,
        20,
        what="the failing job to pause",
    )
    assert (
        "1 consecutive failed runs" in paused["note"] and paused["lastFailure"]["executionId"] == failed["executionId"]
    )
