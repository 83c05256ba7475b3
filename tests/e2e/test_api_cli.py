"""`duetime jobs ...` and `duetime executions` against `duetime local`: tables for people, --json for
scripts, the connection from the data dir, flags or environment, and API errors as exit status 1."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from duetime.cli.main import main

from tests.e2e.helpers import command_output, iso_in, wait_for

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = command_output(capsys)
    return code, out, err


def test_the_job_commands_drive_a_job_through_its_life(local_system, capsys):
    owner = f"cli-{secrets.token_hex(3)}"
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner]
    # Create (as JSON for the script's sake)
    code, out, _ = run(
        capsys, "jobs", "create", "--name", "cli-nightly", "--handler", "demo.echo", "--cron", "0 2 * * *",
        "--tz", "Asia/Kolkata", "--payload", '{"region": "IN"}', "--timeout", "600", "--max-attempts", "5",
        "--idempotency-key", "cli-1", "--json", *conn,
    )  # fmt: skip
    assert code == 0
    job = json.loads(out)
    job_id = job["jobId"]
    assert job["schedule"] == {
        "at": None,
        "cron": "0 2 * * *",
        "every": None,
        "startAt": None,
        "timeZone": "Asia/Kolkata",
        "endAt": None,
        "maxRuns": None,
        "dst": None,
    }
    assert job["retry"]["maxAttempts"] == 5 and job["payload"] == {"region": "IN"} and job["owner"] == owner
    # List: a readable table with a header row and the job
    code, out, _ = run(capsys, "jobs", "list", *conn)
    header, row = out.splitlines()[:2]
    assert code == 0 and header.split()[:4] == ["JOB", "ID", "NAME", "STATUS"]
    assert row.split()[:3] == [job_id, "cli-nightly", "active"] and "0 2 * * * (Asia/Kolkata)" in row
    code, out, _ = run(capsys, "jobs", "list", "--all", "--json", *conn)
    assert [j["jobId"] for j in json.loads(out)["jobs"]] == [job_id]
    # Get, pause, resume
    code, out, _ = run(capsys, "jobs", "get", job_id, *conn)
    assert code == 0 and "next runs:" in out and "nightly" in out
    assert json.loads(run(capsys, "jobs", "pause", job_id, "--json", *conn)[1])["status"] == "paused"
    assert "active" in run(capsys, "jobs", "resume", job_id, *conn)[1]
    # Run now, then the executions table shows it succeeded
    code, out, _ = run(capsys, "jobs", "run", job_id, "--json", *conn)
    manual = json.loads(out)
    assert code == 0 and manual["status"] == "scheduled"

    def finished() -> bool:
        _, text, _ = run(capsys, "executions", job_id, "--json", *conn)
        found = {e["executionId"]: e for e in json.loads(text)["executions"]}
        return found.get(manual["executionId"], {}).get("status") == "succeeded"

    wait_for(finished, 20, what="the run-now execution to succeed")
    code, out, _ = run(capsys, "executions", job_id, *conn)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["EXECUTION", "ID", "SCHEDULED"]
    assert any(manual["executionId"] in line and "succeeded" in line for line in out.splitlines())
    # Cancel
    code, out, _ = run(capsys, "jobs", "cancel", job_id, *conn)
    assert code == 0 and "cancelled" in out
    assert json.loads(run(capsys, "jobs", "get", job_id, "--json", *conn)[1])["status"] == "cancelled"


def test_api_errors_exit_1_with_the_field_and_missing_config_exits_2(local_system, capsys, tmp_path):
    conn = ["--data-dir", str(local_system.data_dir), "--owner", f"cli-{secrets.token_hex(3)}"]
    code, _, err = run(capsys, "jobs", "create", "--name", "x", "--handler", "nope.nothing", "--at", iso_in(60), *conn)
    assert code == 1 and "400 invalid_input" in err and "field handler" in err
    code, _, err = run(capsys, "jobs", "get", "j_0000000000000000", "--json", *conn)
    assert code == 1 and json.loads(err)["error"]["status"] == 404
    code, _, err = run(capsys, "jobs", "list", "--api-url", local_system.api_url, "--token", "bad")
    assert code == 1 and "401" in err
    code, _, err = run(capsys, "jobs", "list", "--data-dir", str(tmp_path))
    assert code == 2 and "DUETIME_API_URL" in err


def test_the_installed_command_reads_url_and_token_from_the_environment(local_system):
    token = local_system.token(f"cli-env-{secrets.token_hex(3)}")
    env = {**os.environ, "DUETIME_API_URL": local_system.api_url, "DUETIME_TOKEN": token}
    command = [sys.executable, "-m", "duetime.cli", "jobs", "list", "--json", "--data-dir", "/nonexistent"]
    env["PYTHONPATH"] = str(ROOT / "layers" / "core" / "python")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"jobs": [], "nextCursor": None}


def test_the_calendar_commands_put_list_get_and_delete_a_calendar(local_system, capsys, tmp_path):
    conn = ["--data-dir", str(local_system.data_dir), "--owner", f"cli-{secrets.token_hex(3)}"]
    dates = tmp_path / "holidays.txt"
    dates.write_text("2026-12-24/2026-12-26\n\n2027-01-01\n")
    code, out, _ = run(capsys, "calendars", "put", "holidays-de", "--file", str(dates), "--date", "2026-10-03",
                       "--json", *conn)  # fmt: skip
    assert code == 0 and json.loads(out)["dates"] == ["2026-10-03", "2026-12-24/2026-12-26", "2027-01-01"]
    code, out, _ = run(capsys, "calendars", "list", *conn)
    header, row = out.splitlines()
    assert header.split() == ["NAME", "ENTRIES", "UPDATED", "DATES"] and row.split()[:2] == ["holidays-de", "3"]
    assert json.loads(run(capsys, "calendars", "get", "holidays-de", "--json", *conn)[1])["name"] == "holidays-de"
    code, _, err = run(capsys, "calendars", "put", "holidays-de", "--date", "24.12.2026", *conn)
    assert code == 1 and "dates" in err
    assert "deleted" in run(capsys, "calendars", "delete", "holidays-de", *conn)[1]
    code, _, err = run(capsys, "calendars", "get", "holidays-de", *conn)
    assert code == 1 and "not found" in err
