"""POST /jobs/bulk and `duetime jobs bulk` against `duetime local` over HTTP: a dry run, a filtered pause that
goes on by cursor, a resume by ids with one failure reported (exit status 1), and a cancel of all matching."""

from __future__ import annotations

import json
import secrets

from duetime.cli.main import main

from tests.e2e.helpers import command_output
from tests.http_client import Api


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = command_output(capsys)
    return code, out, err


def test_bulk_actions_over_http_and_the_cli(local_system, capsys):
    owner = f"bulk-{secrets.token_hex(3)}"
    api = Api(local_system.api_url, local_system.token(owner))
    team = f"team:t{secrets.token_hex(3)}"
    tags = {"team": team.split(":", 1)[1]}

    def create(name: str, job_tags: dict[str, str]) -> str:
        body = {"name": name, "handler": "demo.echo", "schedule": {"cron": "0 3 * * *"}, "tags": job_tags}
        response = api.post("/jobs", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["jobId"])

    def statuses(job_ids: list[str]) -> set[str]:
        return {api.get(f"/jobs/{job_id}").json()["status"] for job_id in job_ids}

    members = [create(f"m{i}", tags) for i in range(3)]
    outsider = create("outsider", {"team": "other"})

    # A dry run over HTTP: the count and the ids, nothing changed
    response = api.post("/jobs/bulk", json={"action": "pause", "filter": {"tag": [team]}, "dryRun": True})
    assert response.status_code == 200, response.text
    dry = response.json()
    assert dry["matched"] == 3 and sorted(dry["jobIds"]) == sorted(members) and statuses(members) == {"active"}

    # The CLI's dry run says the same
    conn = ["--data-dir", str(local_system.data_dir), "--owner", owner]
    code, out, _ = run(capsys, "jobs", "bulk", "pause", "--tag", team, "--dry-run", *conn)
    assert code == 0 and out.splitlines()[0] == "would pause 3 jobs" and set(out.split()) >= set(members)

    # Pause by filter from the CLI, two a request: it follows nextCursor to the end
    code, out, err = run(capsys, "jobs", "bulk", "pause", "--tag", team, "--limit", "2", "--note", "incident", "--json",
                         *conn)  # fmt: skip
    report = json.loads(out)
    assert code == 0, err
    assert sorted(report["changed"]) == sorted(members) and report["failed"] == [] and report["nextCursor"] is None
    assert statuses(members) == {"paused"} and statuses([outsider]) == {"active"}
    assert {api.get(f"/jobs/{job_id}").json()["note"] for job_id in members} == {"incident"}

    # Resume by ids, one of them not the caller's: reported, the others resumed, exit status 1
    elsewhere = Api(local_system.api_url, local_system.token(f"{owner}-other"))
    foreign = elsewhere.post("/jobs", json={"name": "x", "handler": "demo.echo", "schedule": {"cron": "0 3 * * *"}})
    foreign_id = foreign.json()["jobId"]
    code, out, _ = run(capsys, "jobs", "bulk", "resume", *members[:2], foreign_id, *conn)
    assert code == 1
    assert out.splitlines()[0] == "resumed 2" and f"failed {foreign_id}: not_found:" in out
    assert statuses(members[:2]) == {"active"} and statuses(members[2:]) == {"paused"}
    assert elsewhere.get(f"/jobs/{foreign_id}").json()["status"] == "active"

    # Cancel all matching over HTTP; ids and a filter together are refused by the CLI before any request
    code, _, err = run(capsys, "jobs", "bulk", "cancel", members[0], "--tag", team, *conn)
    assert code == 2 and "not both" in err
    response = api.post("/jobs/bulk", json={"action": "cancel", "filter": {"tag": [team]}})
    assert response.status_code == 200 and sorted(response.json()["changed"]) == sorted(members)
    assert statuses(members) == {"cancelled"} and statuses([outsider]) == {"active"}
    # A bad request is 400 naming the field
    response = api.post("/jobs/bulk", json={"action": "pause", "filter": {"tag": ["nocolon"]}})
    assert response.status_code == 400 and response.json()["error"]["field"] == "filter.tag"
