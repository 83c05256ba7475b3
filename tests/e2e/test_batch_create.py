"""POST /jobs/batch over real HTTP against `duetime local` (issue 32): the client library's create_jobs and
`duetime jobs create --batch FILE.jsonl`; the jobs created run and end as POST /jobs's do, a resend with the
items' keys creates nothing, and a refused item is answered in its place (exit 1 from the command)."""

from __future__ import annotations

import json
import secrets

from duetime.cli.main import main
from duetime.client import DuetimeClient

from tests.e2e.helpers import command_output, iso_in, wait_for


def test_a_batch_over_http_creates_jobs_that_run_and_a_resend_with_keys_creates_nothing(local_system):
    client = DuetimeClient.connect(None, None, local_system.data_dir, f"batch-{secrets.token_hex(3)}")
    at = iso_in(2)
    specs = [
        {"name": f"b{n}", "handler": "demo.echo", "schedule": {"at": at}, "idempotencyKey": f"b{n}"} for n in range(3)
    ]
    bad = {"name": "bad", "handler": "demo.echo", "schedule": {"at": at}, "timeoutSeconds": 0}
    results = client.create_jobs([*specs, bad], batch_size=2)  # two requests, answered in order
    assert [r["status"] for r in results] == [201, 201, 201, 400]
    assert results[3]["error"]["field"] == "timeoutSeconds"
    ids = [r["job"]["jobId"] for r in results[:3]]

    def all_ended() -> bool:
        return all(client.request("GET", f"/jobs/{job_id}")["status"] == "completed" for job_id in ids)

    wait_for(all_ended, 30, what="the batch's one-off jobs to run and complete")
    for job_id in ids:
        runs = client.request("GET", f"/jobs/{job_id}/executions")["executions"]
        assert [e["status"] for e in runs] == ["succeeded"]
    again = client.create_jobs(specs)
    assert [r["status"] for r in again] == [200, 200, 200] and [r["job"]["jobId"] for r in again] == ids
    assert len(client.request("GET", "/jobs")["jobs"]) == 3


def test_jobs_create_batch_reads_json_lines_and_exits_1_naming_a_refused_line(local_system, capsys, tmp_path):
    conn = ["--data-dir", str(local_system.data_dir), "--owner", f"cli-batch-{secrets.token_hex(3)}"]
    lines = [
        json.dumps({"name": "r1", "handler": "demo.echo", "schedule": {"cron": "0 3 * * *"}, "idempotencyKey": "r1"}),
        "",
        json.dumps({"name": "r2", "handler": "nope.nothing", "schedule": {"cron": "0 3 * * *"}}),
    ]
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(lines) + "\n")
    code = main(["jobs", "create", "--batch", str(jobs), *conn])
    out, err = command_output(capsys)
    header, first, second = out.splitlines()
    assert code == 1 and "1 of 2 jobs were not created" in err
    assert header.split() == ["#", "STATUS", "JOB", "ID", "NEXT", "RUN", "FIELD", "ERROR"]
    # the table asks for each job's id and next run only (Prefer: return=minimal), --json below for whole jobs
    assert first.split()[:2] == ["1", "201"] and first.split()[3].endswith("T03:00:00.000Z")
    assert second.split()[:5] == ["2", "400", "-", "-", "handler"]
    code = main(["jobs", "create", "--batch", str(jobs), "--json", *conn])
    out, _ = command_output(capsys)
    results = json.loads(out)
    assert code == 1 and [r["status"] for r in results] == [200, 400]
    assert results[0]["job"]["jobId"] == first.split()[2]
    jobs.write_text("not json\n")
    code = main(["jobs", "create", "--batch", str(jobs), *conn])
    assert code == 2 and "line 1 is not JSON" in command_output(capsys)[1]
