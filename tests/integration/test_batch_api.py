"""POST /jobs/batch through the API handler on both backends (issue 32): each item checked, written and
answered on its own as POST /jobs would answer it alone, atomic per job, idempotent per item, and counted
against the owner's quotas item by item."""

from __future__ import annotations

import json
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.definitions import MAX_BATCH_JOBS
from duetime.domain.quotas import ACTIVE_JOBS, JOB_CREATES_PER_MINUTE, Quotas
from duetime.local.http_bridge import to_event

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_api_contract import SECRET, Client, assert_error, job_body

pytestmark = BOTH_BACKENDS


@pytest.fixture
def alice(ports) -> Client:
    return Client(build_app(ports, local_secret=SECRET), issue_token(SECRET, "alice"))


@pytest.fixture
def bob(ports) -> Client:
    return Client(build_app(ports, local_secret=SECRET), issue_token(SECRET, "bob"))


def batch(client, *jobs: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = client.call("POST", "/jobs/batch", {"jobs": list(jobs)})
    assert status == 200, body
    assert len(body["results"]) == len(jobs)
    return list(body["results"])


def executions_of(client, job_id: str) -> list[dict[str, Any]]:
    status, page = client.call("GET", f"/jobs/{job_id}/executions")
    assert status == 200, page
    return list(page["executions"])


def test_each_item_is_answered_in_order_and_a_bad_one_refuses_only_itself(alice, ports):
    results = batch(
        alice,
        job_body(name="one"),
        job_body(name="bad", schedule={"cron": "61 * * * *"}),
        job_body(name="cron", schedule={"cron": "0 9 * * *"}),
        job_body(name="typo", nmae="x"),
        job_body(name="key", idempotencyKey=""),
        job_body(name="handler", handler=""),
    )
    assert [r["status"] for r in results] == [201, 400, 201, 400, 400, 400]
    fields = [r["error"]["field"] for r in results if r["status"] == 400]
    assert fields == ["schedule.cron", "nmae", "idempotencyKey", "handler"]
    assert all(r["error"]["code"] and r["error"]["message"] and "job" not in r for r in results if r["status"] == 400)
    # Each created job is stored with its first execution, as POST /jobs writes it, and counted once
    one, cron = results[0]["job"], results[2]["job"]
    assert one["name"] == "one" and cron["nextRuns"]
    single = alice.call("POST", "/jobs", job_body(name="single"))[1]
    assert set(one) == set(single) and one["nextRunAt"] == single["nextRunAt"]  # the job as POST /jobs answers it
    assert [e["scheduledAt"] for e in executions_of(alice, one["jobId"])] == [single["nextRunAt"]]
    assert len(executions_of(alice, cron["jobId"])) == 1
    assert alice.call("GET", f"/jobs/{one['jobId']}")[1]["name"] == "one"
    assert {j["name"] for j in alice.call("GET", "/jobs")[1]["jobs"]} == {"one", "cron", "single"}
    assert ports.store.active_jobs("alice") == 3


def test_prefer_return_minimal_answers_each_job_by_its_id_and_next_run_and_says_so(alice):
    # Given a batch sent with Prefer: return=minimal (RFC 7240; another preference beside it is ignored)
    jobs = [
        job_body(name="one"),
        job_body(name="bad", schedule={"cron": "61 * * * *"}),
        job_body(name="cron", schedule={"cron": "0 9 * * *"}),
        job_body(name="keyed", idempotencyKey="k-min"),
        job_body(name="keyed", idempotencyKey="k-min"),
    ]
    sent = {"Authorization": f"Bearer {alice.token}", "prefer": "respond-async, return=minimal; x=1"}
    response = alice.app.resolve(to_event("POST", "/jobs/batch", sent, json.dumps({"jobs": jobs}).encode()), None)
    assert response["statusCode"] == 200
    headers = {k.lower(): v for k, v in response["multiValueHeaders"].items()}
    assert headers["preference-applied"] == ["return=minimal"]
    results = json.loads(response["body"])["results"]
    # Then each job it created or replayed is answered by its id and next run only; a refused item in full
    assert [r["status"] for r in results] == [201, 400, 201, 201, 200]
    assert results[1]["error"]["field"] == "schedule.cron" and "jobId" not in results[1]
    for answer in (results[0], results[2], results[3], results[4]):
        assert set(answer) == {"status", "jobId", "nextRunAt"}
        job = alice.call("GET", f"/jobs/{answer['jobId']}")[1]
        assert answer["nextRunAt"] == job["nextRunAt"]  # what the whole job would have said
    assert results[3]["jobId"] == results[4]["jobId"]
    # And without the preference the whole job is answered, as before
    assert "job" in batch(alice, job_body(name="whole"))[0]


def test_an_item_key_replays_its_job_in_the_batch_across_batches_and_with_post_jobs(alice, bob):
    first = batch(alice, job_body(name="a", idempotencyKey="k-a"), job_body(name="a", idempotencyKey="k-a"))
    assert [r["status"] for r in first] == [201, 200]
    job_id = first[0]["job"]["jobId"]
    assert first[1]["job"]["jobId"] == job_id
    again = batch(
        alice,
        job_body(name="a", idempotencyKey="k-a"),
        job_body(name="other", idempotencyKey="k-a"),
        job_body(name="b"),
    )
    assert [r["status"] for r in again] == [200, 422, 201]
    assert again[0]["job"]["jobId"] == job_id and again[1]["error"]["field"] == "idempotencyKey"
    # The item's key is the Idempotency-Key of POST /jobs: one namespace per owner
    assert alice.call("POST", "/jobs", job_body(name="a"), headers={"Idempotency-Key": "k-a"})[1]["jobId"] == job_id
    assert batch(bob, job_body(name="a", idempotencyKey="k-a"))[0]["status"] == 201  # bob's keys are his own
    assert len(alice.call("GET", "/jobs")[1]["jobs"]) == 2


def test_a_batch_past_the_owners_quotas_creates_the_items_that_fit_and_429s_the_rest(alice, ports):
    ports.quotas = Quotas(max_active_jobs=3)
    results = batch(alice, *[job_body(name=f"q{n}") for n in range(5)])
    assert [r["status"] for r in results] == [201, 201, 201, 429, 429]
    assert all(r["error"]["field"] == ACTIVE_JOBS and r["retryAfter"] > 0 for r in results[3:])
    assert ports.store.active_jobs("alice") == 3 and len(alice.call("GET", "/jobs")[1]["jobs"]) == 3

    ports.quotas = Quotas(job_creates_per_minute=2)
    results = batch(alice, *[job_body(name=f"r{n}") for n in range(3)])
    assert [r["status"] for r in results] == [201, 201, 429]
    assert results[2]["error"]["field"] == JOB_CREATES_PER_MINUTE and 1 <= results[2]["retryAfter"] <= 60


def test_a_full_batch_is_taken_and_one_past_the_limit_or_an_empty_one_is_400(alice, ports, backend):
    # moto copies its tables for each transaction (tens of seconds for 500 jobs on this machine): on moto a
    # batch spanning several transactions of 100 items stands for the full one.
    size = MAX_BATCH_JOBS if backend == "sqlite" else 120
    results = batch(alice, *[job_body(name=f"n{n}", idempotencyKey=f"k{n}") for n in range(size)])
    assert {r["status"] for r in results} == {201}
    assert len({r["job"]["jobId"] for r in results}) == size == ports.store.active_jobs("alice")
    too_many = {"jobs": [job_body()] * (MAX_BATCH_JOBS + 1)}
    assert_error(alice.call("POST", "/jobs/batch", too_many), 400, "jobs")
    assert_error(alice.call("POST", "/jobs/batch", {"jobs": []}), 400, "jobs")
    assert_error(alice.call("POST", "/jobs/batch", {"jobs": ["not a job"]}), 400, "jobs")
    assert ports.store.active_jobs("alice") == size
