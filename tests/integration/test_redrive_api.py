"""POST /executions/{id}/retry, GET /dead-letters and POST /dead-letters/redrive through the API handler, on
every backend: owner scoping, 404/409/422 with the field named, paging."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.domain.models import format_time
from duetime.service import executions as execution_cases
from duetime.service.deadletters import drain_dead_letters

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_api_contract import SECRET, Client, assert_error

pytestmark = BOTH_BACKENDS


@pytest.fixture
def app(ports):
    return build_app(ports, local_secret=SECRET)


@pytest.fixture
def alice(app):
    return Client(app, issue_token(SECRET, "alice"))


@pytest.fixture
def bob(app):
    return Client(app, issue_token(SECRET, "bob"))


def failed_for_good(client: Client, ports, clock) -> dict[str, Any]:
    """A job of one attempt, due in 5 s, submitted over the API, whose execution fails, its owner told."""
    at = format_time(clock() + timedelta(seconds=5))
    status, job = client.call(
        "POST", "/jobs", {"name": "t", "handler": "demo.echo", "schedule": {"at": at}, "retry": {"maxAttempts": 1}}
    )
    assert status == 201, job
    clock.advance(10)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = execution_cases.claim_execution(ports, received.message, "w1")
    execution_cases.complete(ports, received.message.key, 1, succeeded=False, error="boom")
    ports.queues.delete("default", received.receipt)
    drain_dead_letters(ports, "default")
    return {"jobId": job["jobId"], "executionId": claim.execution.execution_id}


def test_a_failure_is_listed_retried_and_leaves_the_dead_letters(alice, bob, ports, clock):
    failed = failed_for_good(alice, ports, clock)
    status, page = alice.call("GET", "/dead-letters")
    assert status == 200 and page["nextCursor"] is None
    [listed] = page["executions"]
    assert (listed["executionId"], listed["status"], listed["error"], listed["attempt"]) == (
        failed["executionId"],
        "failed",
        "boom",
        1,
    )
    assert bob.call("GET", "/dead-letters") == (200, {"executions": [], "nextCursor": None})
    # Another owner cannot retry it: 404, as for anything of another owner's
    assert_error(bob.call("POST", f"/executions/{failed['executionId']}/retry"), 404, "jobId")
    status, retried = alice.call("POST", f"/executions/{failed['executionId']}/retry")
    assert status == 200, retried
    assert (retried["status"], retried["attempt"], retried["retryBase"]) == ("scheduled", 1, 1)
    assert alice.call("GET", "/dead-letters")[1]["executions"] == []
    # Retried already: not failed any more, 409 naming the status
    assert_error(alice.call("POST", f"/executions/{failed['executionId']}/retry"), 409, "status")
    # It is sent again at once
    [received] = ports.queues.receive("default", 10, 0, 30)
    assert received.message.execution_id == failed["executionId"] and received.message.retry_base == 1


def test_an_execution_that_did_not_fail_or_of_a_cancelled_job_is_409(alice, ports, clock):
    status, job = alice.call(
        "POST", "/jobs", {"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T10:00:00Z"}}
    )
    [waiting] = alice.call("GET", f"/jobs/{job['jobId']}/executions")[1]["executions"]
    assert_error(alice.call("POST", f"/executions/{waiting['executionId']}/retry"), 409, "status")
    failed = failed_for_good(alice, ports, clock)
    assert alice.call("DELETE", f"/jobs/{failed['jobId']}")[0] == 204
    assert_error(alice.call("POST", f"/executions/{failed['executionId']}/retry"), 409, "status")


def test_an_execution_id_that_names_nothing_is_404(alice):
    assert_error(alice.call("POST", "/executions/nonsense/retry"), 404, "executionId")
    assert_error(alice.call("POST", "/executions/j_00000000000000aa.0000000000001/retry"), 404, "jobId")


def test_dead_letters_page_with_a_cursor_bound_to_the_owner(alice, bob, ports, clock):
    ids = [failed_for_good(alice, ports, clock)["executionId"] for _ in range(3)]
    seen, cursor = [], None
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, page = alice.call("GET", f"/dead-letters{query}")
        assert status == 200
        seen += [e["executionId"] for e in page["executions"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
        assert_error(bob.call("GET", f"/dead-letters?cursor={cursor}"), 400, "cursor")
    assert seen == ids[::-1]


def test_a_redrive_by_ids_and_by_filter_reports_what_it_did(alice, bob, ports, clock):
    first = failed_for_good(alice, ports, clock)
    second = failed_for_good(alice, ports, clock)
    status, report = alice.call(
        "POST", "/dead-letters/redrive", {"executionIds": [first["executionId"], "j_00000000000000aa.0000000000001"]}
    )
    assert status == 200, report
    assert [e["executionId"] for e in report["retried"]] == [first["executionId"]]
    assert [(r["executionId"], r["code"]) for r in report["refused"]] == [
        ("j_00000000000000aa.0000000000001", "not_found")
    ]
    # bob's filter finds none of alice's
    assert bob.call("POST", "/dead-letters/redrive", {"all": True})[1]["retried"] == []
    status, report = alice.call("POST", "/dead-letters/redrive", {"jobId": second["jobId"]})
    assert [e["executionId"] for e in report["retried"]] == [second["executionId"]] and report["nextCursor"] is None
    assert alice.call("GET", "/dead-letters")[1]["executions"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, None),
        ({"executionIds": []}, "executionIds"),
        ({"executionIds": ["x"] * 101}, "executionIds"),
        ({"executionIds": ["x"], "jobId": "j_1"}, None),
        ({"all": True, "limit": 0}, "limit"),
        ({"all": True, "limit": 101}, "limit"),
        ({"all": True, "failedAfter": "yesterday"}, "failedAfter"),
        ({"all": True, "cursor": "garbage"}, "cursor"),
    ],
)
def test_a_bad_redrive_is_refused_naming_the_field(alice, body, field):
    code, answer = alice.call("POST", "/dead-letters/redrive", body)
    assert code in (400, 422), answer
    if field is not None:
        assert answer["error"]["field"] == field, answer
