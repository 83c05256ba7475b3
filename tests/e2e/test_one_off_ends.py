"""A one-off job ends when its run ends (issue 35), as a new user meets it: `duetime local --max-active-jobs 3`
started from a project folder, one-off jobs submitted over HTTP one after another, each ending `completed`
and giving its place in the quota back, so the fourth and the tenth are accepted too."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.helpers import E2E_BACKEND, iso_in, submit, wait_for, wait_terminal
from tests.e2e.test_project_handlers import DUETIME, start_local, token
from tests.http_client import Api


@pytest.fixture(scope="module")
def quota_of_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    project = tmp_path_factory.mktemp("reminders-project")
    data_dir = tmp_path_factory.mktemp("data")
    local, api_url = start_local(
        project, data_dir, "--backend", E2E_BACKEND, "--workers", "2", "--shards", "2", "--max-active-jobs", "3"
    )
    try:
        yield project, data_dir, api_url
    finally:
        assert local.stop() == 0


def test_ten_one_off_jobs_one_after_another_are_all_accepted_and_each_ends_completed(quota_of_three):
    project, data_dir, api_url = quota_of_three
    alice = Api(api_url, token(project, data_dir, "alice"))
    jobs = []
    for n in range(10):
        job = submit(alice, name=f"reminder-{n}", handler="demo.echo", schedule={"at": iso_in(1)})
        [run] = wait_terminal(alice, job["jobId"], timeout=60)
        assert run["status"] == "succeeded", run
        # The run's end and the job's are one write: once the run reads succeeded, the job reads completed
        ended = alice.get(f"/jobs/{job['jobId']}").json()
        assert ended["status"] == "completed" and ended["note"] == "its one run ended", ended
        jobs.append(job["jobId"])
    listed = alice.get("/jobs?status=completed&limit=50").json()["jobs"]
    assert {j["jobId"] for j in listed} == set(jobs)
    assert all(j["lastRun"]["status"] == "succeeded" and j["nextRunAt"] is None for j in listed)
    # The quota still binds jobs that have not ended: three waiting an hour, and a fourth refused
    for n in range(3):
        submit(alice, name=f"later-{n}", handler="demo.echo", schedule={"at": iso_in(3600)})
    refused = alice.post("/jobs", json={"name": "x", "handler": "demo.echo", "schedule": {"at": iso_in(3600)}})
    assert refused.status_code == 429 and refused.json()["error"]["field"] == "activeJobs", refused.text


def test_a_retried_one_off_run_reopens_its_job_until_it_ends_again(quota_of_three):
    project, data_dir, api_url = quota_of_three
    bob = Api(api_url, token(project, data_dir, "bob"))
    job = submit(bob, handler="demo.fail", payload={"times": 1}, retry={"maxAttempts": 1}, schedule={"at": iso_in(1)})
    [failed] = wait_terminal(bob, job["jobId"], timeout=60)
    assert failed["status"] == "failed"
    assert bob.get(f"/jobs/{job['jobId']}").json()["status"] == "completed"
    # A run-now of the completed job is refused naming its status
    refused = bob.post(f"/jobs/{job['jobId']}/run")
    assert refused.status_code == 409 and refused.json()["error"]["field"] == "status", refused.text
    retried = bob.post(f"/executions/{failed['executionId']}/retry")
    assert retried.status_code == 200, retried.text

    def succeeded_and_completed() -> bool:
        runs = bob.get(f"/jobs/{job['jobId']}/executions").json()["executions"]
        status = bob.get(f"/jobs/{job['jobId']}").json()["status"]
        return runs[0]["status"] == "succeeded" and status == "completed"

    wait_for(succeeded_and_completed, 60, what="the retried run to succeed and its job to complete again")


def test_the_cli_lists_a_finished_one_off_job_as_completed(quota_of_three):
    project, data_dir, api_url = quota_of_three
    carol_token = token(project, data_dir, "carol")
    carol = Api(api_url, carol_token)
    job = submit(carol, name="cli-listed", handler="demo.echo", schedule={"at": iso_in(1)})
    wait_terminal(carol, job["jobId"], timeout=60)
    env = {"DUETIME_API_URL": api_url, "DUETIME_TOKEN": carol_token, "PATH": "/usr/bin:/bin"}
    listed = subprocess.run(
        [DUETIME, "jobs", "list"], cwd=project, capture_output=True, text=True, timeout=60, env=env, check=True
    )
    [row] = [line for line in listed.stdout.splitlines() if job["jobId"] in line]
    assert "completed" in row and "succeeded" in row, listed.stdout
