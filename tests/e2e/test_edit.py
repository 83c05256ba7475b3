"""Editing a job in place over `duetime local`: over HTTP the new first slot runs under the edited spec, under
the same job id, and a lost update is refused; through the `duetime` CLI with --json."""

from __future__ import annotations

import json
import secrets
from typing import Any

from duetime.cli.main import main

from tests.e2e.helpers import command_output, executions, iso_in, submit, wait_terminal


def test_an_edited_job_runs_its_new_first_slot_with_its_new_payload_and_keeps_its_id(api):
    # Given a nightly job, whose next run is hours away
    job = submit(api, handler="demo.echo", schedule={"cron": "0 3 * * *"}, payload={"v": 1})
    path = f"/jobs/{job['jobId']}"
    read = api.get(path).json()
    # When it is edited (under the version read) to run in two seconds with another payload
    edited = api.patch(path, json={"version": read["version"], "schedule": {"at": iso_in(2)}, "payload": {"v": 2}})
    assert edited.status_code == 200, edited.text
    assert edited.json()["version"] == read["version"] + 1
    # Then a second editor that read the same version is refused, naming the field
    lost = api.patch(path, json={"version": read["version"], "payload": {"v": 3}})
    assert lost.status_code == 409 and lost.json()["error"]["field"] == "version"
    # And the new slot runs with the edited payload, as the only run of the same job: the nightly one is gone
    done = wait_terminal(api, job["jobId"], timeout=30)
    assert done[0]["status"] == "succeeded" and done[0]["result"] == {"v": 2}
    assert [e["executionId"] for e in executions(api, job["jobId"])] == [done[0]["executionId"]]


def cli(capsys: Any, *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out, err = command_output(capsys)
    return code, json.loads(out) if code == 0 and out.strip() else err


def test_jobs_edit_through_the_cli(local_system, capsys):
    conn = ["--data-dir", str(local_system.data_dir), "--owner", f"edit-{secrets.token_hex(3)}", "--json"]
    code, job = cli(capsys, "jobs", "create", "--name", "n", "--handler", "demo.echo", "--cron", "0 3 * * *", *conn)
    assert code == 0
    code, edited = cli(
        capsys, "jobs", "edit", job["jobId"], "--version", str(job["version"]), "--cron", "30 4 * * *", *conn
    )
    assert code == 0 and edited["schedule"]["cron"] == "30 4 * * *" and edited["nextRunAt"] != job["nextRunAt"]
    code, err = cli(capsys, "jobs", "edit", job["jobId"], "--version", str(job["version"]), "--name", "late", *conn)
    assert code != 0 and "version" in err
