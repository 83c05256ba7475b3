"""The API over real HTTP on `duetime local`: concurrent idempotency, owner isolation, 401s, the served
OpenAPI document."""

from __future__ import annotations

import secrets
import threading
from typing import Any

from duetime.api.openapi import openapi_document

from tests.e2e.helpers import iso_in, submit
from tests.http_client import Api

FAR = 3600 * 24 * 30  # a month ahead: these jobs never run during the tests


def fresh_owner(local_system: Any, name: str) -> Api:
    """A caller of their own, so listings hold only what this test made."""
    return Api(local_system.api_url, local_system.token(f"{name}-{secrets.token_hex(3)}"))


def test_ten_concurrent_posts_with_one_idempotency_key_create_exactly_one_job(local_system):
    # Given one owner and one Idempotency-Key
    api = fresh_owner(local_system, "idem")
    body = {"name": "concurrent", "handler": "demo.echo", "schedule": {"at": iso_in(FAR)}}
    barrier = threading.Barrier(10)
    results: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def post() -> None:
        caller = api.fork()
        barrier.wait()
        response = caller.post("/jobs", json=body, headers={"Idempotency-Key": "once"})
        with lock:
            results.append((response.status_code, response.json()))

    # When 10 threads send the same request at once
    threads = [threading.Thread(target=post) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then one created the job and every other got that same job back
    statuses = sorted(status for status, _ in results)
    assert statuses == [200] * 9 + [201], results
    assert len({job["jobId"] for _, job in results}) == 1
    # And the owner has exactly one job, with exactly one execution
    jobs = api.get("/jobs").json()["jobs"]
    assert [j["jobId"] for j in jobs] == [results[0][1]["jobId"]]
    assert len(api.get(f"/jobs/{jobs[0]['jobId']}/executions").json()["executions"]) == 1
    # And the same key with another body is 422
    other = api.post("/jobs", json={**body, "name": "different"}, headers={"Idempotency-Key": "once"})
    assert other.status_code == 422 and other.json()["error"]["field"] == "Idempotency-Key"


def test_a_second_owner_cannot_see_change_page_into_or_heartbeat_the_first_owners_jobs(local_system, worker_api):
    alice, bob = fresh_owner(local_system, "alice"), fresh_owner(local_system, "bob")
    # Given alice's job with two executions (its slot and a run-now)
    job = submit(alice, handler="demo.echo", schedule={"at": iso_in(FAR)})
    job_path = f"/jobs/{job['jobId']}"
    assert alice.patch(job_path, json={"status": "paused"}).status_code == 200
    assert alice.patch(job_path, json={"status": "active"}).status_code == 200
    assert alice.post(f"{job_path}/run").status_code == 201
    executions = alice.get(f"{job_path}/executions", params={"limit": 1}).json()
    cursor = executions["nextCursor"]
    [execution] = executions["executions"]  # the slot a month ahead: newest scheduled first
    assert cursor and execution["status"] == "scheduled"
    # Then bob sees nothing of it
    assert bob.get("/jobs").json() == {"jobs": [], "nextCursor": None}
    for method, path, body in [
        ("GET", job_path, None),
        ("PATCH", job_path, {"status": "paused"}),
        ("DELETE", job_path, None),
        ("POST", f"{job_path}/run", None),
        ("GET", f"{job_path}/executions", None),
    ]:
        response = bob.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    # Nor can he page into it with alice's cursor, or page his own listing with one of hers
    assert bob.get(f"{job_path}/executions", params={"cursor": cursor}).status_code == 404
    first_page = alice.get("/jobs", params={"limit": 1}).json()
    assert bob.get("/jobs", params={"cursor": first_page["nextCursor"] or "x"}).status_code == 400
    # Nor heartbeat or complete its execution (worker routes take a worker token)
    beat = bob.post(
        f"/executions/{execution['executionId']}/heartbeat", json={"attempt": 1, "workerId": "w1", "claimToken": "t"}
    )
    assert beat.status_code == 404
    done = bob.post(
        f"/executions/{execution['executionId']}/complete",
        json={"attempt": 1, "workerId": "w1", "claimToken": "t", "result": "failed"},
    )
    assert done.status_code == 404
    # And a worker that does not hold the attempt is fenced out (the execution waits, unclaimed)
    stale = worker_api.post(
        f"/executions/{execution['executionId']}/heartbeat", json={"attempt": 1, "workerId": "w1", "claimToken": "t"}
    )
    assert stale.status_code == 409
    # And alice's job is as she left it
    after = alice.get(job_path).json()
    assert after["status"] == "active" and after["version"] == job["version"] + 2


def test_every_route_is_401_over_http_without_a_token(local_system):
    anonymous = Api(local_system.api_url, None, timeout=10)
    for method, path in [
        ("POST", "/jobs"),
        ("GET", "/jobs"),
        ("GET", "/jobs/j_00/executions"),
        ("POST", "/schedules/preview"),
        ("POST", "/executions/j_00.1796115600000/heartbeat"),
    ]:
        response = anonymous.request(method, path, json={})
        assert response.status_code == 401, (method, path)
        assert response.json()["error"]["code"] == "unauthorized"
    garbage = Api(local_system.api_url, "nope", timeout=10).get("/jobs")
    assert garbage.status_code == 401


def test_the_openapi_document_is_served_without_a_token(local_system):
    response = Api(local_system.api_url, None, timeout=10).get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == openapi_document()
