"""`duetime limits ...` and a job's --rate-limit/--max-concurrent against `duetime local` over HTTP: the
limit's life, the 4xx naming the field for a bad one, and a limited job that runs and shows its wait."""

from __future__ import annotations

import json
import secrets

from duetime.cli.main import main

from tests.e2e.helpers import command_output, iso_in, wait_for


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = command_output(capsys)
    return code, out, err


def test_the_limit_commands_put_list_get_and_delete_a_limit_that_jobs_name(local_system, capsys):
    conn = ["--data-dir", str(local_system.data_dir), "--owner", f"cli-{secrets.token_hex(3)}"]
    # Put, list, get
    code, out, _ = run(capsys, "limits", "put", "partner-api", "--per-second", "5", "--burst", "2",
                       "--max-concurrent", "3", "--json", *conn)  # fmt: skip
    limit = json.loads(out)
    assert code == 0 and (limit["perSecond"], limit["burst"], limit["maxConcurrent"]) == (5, 2, 3)
    code, out, _ = run(capsys, "limits", "list", *conn)
    header, row = out.splitlines()
    assert header.split() == ["NAME", "PER_SECOND", "BURST", "MAX_CONCURRENT", "UPDATED"]
    assert row.split()[:4] == ["partner-api", "5.0", "2", "3"]
    assert json.loads(run(capsys, "limits", "get", "partner-api", "--json", *conn)[1])["name"] == "partner-api"
    # A bad number is a 4xx naming its field
    code, _, err = run(capsys, "limits", "put", "partner-api", "--per-second", "0", "--json", *conn)
    assert code == 1 and json.loads(err)["error"]["field"] == "perSecond"
    # A job naming a limit the owner does not have is refused, naming rateLimit
    code, _, err = run(capsys, "jobs", "create", "--name", "x", "--handler", "demo.echo", "--at", iso_in(60),
                       "--rate-limit", "nope", "--json", *conn)  # fmt: skip
    assert code == 1 and json.loads(err)["error"]["field"] == "rateLimit"
    # A job naming it runs, under its cap, and its execution shows the (here absent) wait
    code, out, _ = run(capsys, "jobs", "create", "--name", "limited", "--handler", "demo.echo", "--at", iso_in(1),
                       "--rate-limit", "partner-api", "--max-concurrent", "2", "--json", *conn)  # fmt: skip
    job = json.loads(out)
    assert code == 0 and (job["rateLimit"], job["maxConcurrent"]) == ("partner-api", 2)

    def succeeded() -> dict | None:
        listed = json.loads(run(capsys, "executions", job["jobId"], "--json", *conn)[1])["executions"]
        return listed[0] if listed and listed[0]["status"] == "succeeded" else None

    execution = wait_for(succeeded, 30, what="the limited job's run")
    assert execution["attempt"] == 1 and "waitedForLimitMs" in execution
    # A limit a live job names cannot be deleted; once no job does, it can
    code, out, _ = run(capsys, "jobs", "create", "--name", "cron", "--handler", "demo.echo", "--cron", "0 3 * * *",
                       "--rate-limit", "partner-api", "--json", *conn)  # fmt: skip
    cron_id = json.loads(out)["jobId"]
    code, _, err = run(capsys, "limits", "delete", "partner-api", "--json", *conn)
    assert code == 1 and json.loads(err)["error"]["status"] == 409 and cron_id in json.loads(err)["error"]["message"]
    for job_id in (cron_id, job["jobId"]):  # a one-off that has run stays active until cancelled or deleted
        assert run(capsys, "jobs", "cancel", job_id, *conn)[0] == 0
    code, out, err = run(capsys, "limits", "delete", "partner-api", *conn)
    assert code == 0 and "deleted" in out, err
    code, _, err = run(capsys, "limits", "get", "partner-api", *conn)
    assert code == 1 and "not found" in err
