"""Listing pages bounded by what they carry, through the API handler on every backend: a page of executions
whose runs returned ~128 KB results, or dead letters carrying ~256 KB payloads, stays under the budget
(a synchronous Lambda response is capped at 6 MB), and following nextCursor still reaches every execution
exactly once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from duetime.api.app import build_app
from duetime.api.auth import issue_token
from duetime.api.models import MAX_PAGE_BODY_BYTES
from duetime.definitions import MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES
from duetime.domain.models import ExecutionStatus, format_time
from duetime.service import executions as execution_cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import new_execution

from tests.conftest import BOTH_BACKENDS
from tests.integration.test_api_contract import SECRET, Client

pytestmark = BOTH_BACKENDS

# 'é' is 2 bytes of UTF-8 and 6 as the \u escape a Lambda reply may carry it in: the measure that counts
LARGE_RESULT = {"text": "é" * ((MAX_RESULT_BYTES - 20) // 2)}
LARGE_PAYLOAD = {"blob": "é" * ((MAX_PAYLOAD_BYTES - 20) // 2)}


@pytest.fixture
def alice(ports):
    return Client(build_app(ports, local_secret=SECRET), issue_token(SECRET, "alice"))


def pages(client: Client, path: str) -> list[list[dict[str, Any]]]:
    """Every page of a listing at its default size, following nextCursor; each checked against the budget."""
    found, cursor = [], None
    while True:
        status, page = client.call("GET", path + (f"?cursor={cursor}" if cursor else ""))
        assert status == 200, page
        carried = sum(
            len(json.dumps(json.dumps(e, ensure_ascii=False, separators=(",", ":")))) for e in page["executions"]
        )
        assert carried <= MAX_PAGE_BODY_BYTES
        found.append(page["executions"])
        cursor = page["nextCursor"]
        if cursor is None:
            return found


def test_a_page_of_executions_with_large_results_stays_under_the_budget_and_paging_reaches_each_once(
    alice, ports, clock
):
    status, created = alice.call(
        "POST", "/jobs", {"name": "t", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}}
    )
    assert status == 201, created
    job = ports.store.get_job(created["jobId"])
    stored = set()
    for minute in range(1, 25):  # 24 runs that returned ~128 KB each: ~9 MB as a Lambda reply would carry them
        run = new_execution(job, clock() - timedelta(minutes=minute)).model_copy(
            update={"status": ExecutionStatus.SUCCEEDED, "result": LARGE_RESULT, "finished_at": clock()}
        )
        ports.store.put_execution(run)
        stored.add(run.execution_id)
    found = pages(alice, f"/jobs/{job.job_id}/executions")
    ids = [e["executionId"] for page in found for e in page]
    assert len(ids) == len(set(ids)) and stored <= set(ids)  # each once, none lost at a page's edge
    assert len(found) >= 3 and all(len(page) > 1 for page in found[:-1])  # bounded by size, not one by one
    assert all(e["result"] == LARGE_RESULT for page in found for e in page if e["executionId"] in stored)


def test_a_page_of_dead_letters_with_large_payloads_stays_under_the_budget_and_paging_reaches_each_once(
    alice, ports, clock
):
    failed = set()
    later = format_time(clock() + timedelta(days=1))
    for _ in range(7):  # each run now carries the largest payload: ~770 KB as a Lambda reply would carry it
        body = {"name": "t", "handler": "demo.echo", "schedule": {"at": later}, "retry": {"maxAttempts": 1}}
        status, job = alice.call("POST", "/jobs", body)
        assert status == 201, job
        status, run = alice.call(
            "POST", f"/jobs/{job['jobId']}/run", raw=json.dumps({"payload": LARGE_PAYLOAD}, ensure_ascii=False)
        )
        assert status in (200, 201, 202), run
        clock.advance(10)
        [received] = ports.queues.receive("default", 10, 0, 30)
        claim = execution_cases.claim_execution(ports, received.message, "w1")
        execution_cases.complete(ports, received.message.key, 1, succeeded=False, error="boom")
        ports.queues.delete("default", received.receipt)
        failed.add(claim.execution.execution_id)
    drain_dead_letters(ports, "default")
    found = pages(alice, "/dead-letters")
    ids = [e["executionId"] for page in found for e in page]
    assert sorted(ids) == sorted(failed)
    assert len(found) >= 2 and all(len(page) > 1 for page in found[:-1])
    assert all(e["payload"] == LARGE_PAYLOAD for page in found for e in page)
