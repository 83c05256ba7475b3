"""Retrying a failed execution and redriving dead letters through the service, on every backend: a fresh
retry budget, attempt numbers that go on (a stale worker is still fenced out), owner scoping, 409s."""

from __future__ import annotations

import pytest
from duetime.domain.errors import Conflict, InvalidInput, NotFound, StaleAttempt
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.jobs import cancel_job, submit_job
from duetime.service.redrive import DeadLetterFilter, list_dead_letters, redrive, retry_execution

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


def spec(**overrides):
    body = {
        "name": "t",
        "handler": "demo.echo",
        "schedule": {"at": "2026-12-01T09:00:05Z"},
        "retry": {"maxAttempts": 2, "baseDelaySeconds": 1, "maxDelaySeconds": 1},
    }
    body.update(overrides)
    return JobSpec.model_validate(body)


def run_and_fail(ports, clock, worker="w"):
    """Receive the one due message, claim it and fail the attempt; returns the claimed attempt's row."""
    clock.advance(2)  # past a retry's backoff (1 s here)
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = cases.claim_execution(ports, received.message, worker)
    assert claim.verdict == cases.ClaimVerdict.CLAIMED, claim
    cases.complete(ports, received.message.key, claim.execution.attempt, succeeded=False, error="boom")
    ports.queues.delete("default", received.receipt)
    return claim.execution


def fail_for_good(ports, clock, owner="alice", **overrides):
    """A job whose one execution failed after both its attempts, its owner told."""
    job, _ = submit_job(ports, owner, spec(**overrides))
    clock.advance(5)
    run_and_fail(ports, clock)
    run_and_fail(ports, clock)
    assert drain_dead_letters(ports, "default") == 1
    failed = list_dead_letters(ports, owner, 10, None).items[0]  # the newest
    assert failed.job_id == job.job_id
    assert (failed.status, failed.attempt, failed.error) == (ExecutionStatus.FAILED, 2, "boom")
    return job, failed


def test_a_retried_execution_gets_a_fresh_budget_with_attempt_numbers_going_on(ports, clock):
    job, failed = fail_for_good(ports, clock)
    # When its owner retries it
    clock.advance(60)
    retried = retry_execution(ports, "alice", failed.execution_id)
    # Then it waits again, due now, same id, its budget counted from attempt 2
    assert (retried.execution_id, retried.status, retried.due_at) == (
        failed.execution_id,
        ExecutionStatus.SCHEDULED,
        clock(),
    )
    assert retried.attempt == 2 and retried.retry_base == 2
    assert list_dead_letters(ports, "alice", 10, None).items == []
    # It runs twice more (attempts 3 and 4: the job's maxAttempts of 2, from the retry) and fails for good again
    assert run_and_fail(ports, clock).attempt == 3
    assert run_and_fail(ports, clock).attempt == 4
    assert ports.queues.receive("default", 10, 0, 30) == []
    drain_dead_letters(ports, "default")
    [again] = list_dead_letters(ports, "alice", 10, None).items
    assert (again.execution_id, again.status, again.attempt) == (failed.execution_id, ExecutionStatus.FAILED, 4)
    assert [a.attempt for a in again.attempts] == [1, 2, 3, 4]


def test_a_stale_worker_of_an_old_attempt_is_still_refused_after_a_retry(ports, clock):
    _, failed = fail_for_good(ports, clock)
    retry_execution(ports, "alice", failed.execution_id)
    [received] = ports.queues.receive("default", 10, 0, 30)
    # The old attempt 2 writes to the new row: fenced out
    with pytest.raises(StaleAttempt):
        cases.complete(ports, received.message.key, 2, succeeded=True)
    claim = cases.claim_execution(ports, received.message, "w3")
    assert claim.execution.attempt == 3
    with pytest.raises(StaleAttempt):
        cases.complete(ports, received.message.key, 2, succeeded=True)
    done = cases.complete(ports, received.message.key, 3, succeeded=True, result={"ok": 1})
    assert done.status == ExecutionStatus.SUCCEEDED


def test_a_retried_execution_whose_workers_are_lost_gets_its_own_attempts_before_failing(ports, clock):
    _, failed = fail_for_good(ports, clock)
    retry_execution(ports, "alice", failed.execution_id)
    [received] = ports.queues.receive("default", 10, 0, 30)
    for worker in ("w3", "w4"):  # two attempts of the new budget, each worker lost
        assert cases.claim_execution(ports, received.message, worker).verdict == cases.ClaimVerdict.CLAIMED
        clock.advance(31)
    claim = cases.claim_execution(ports, received.message, "w5")
    assert claim.verdict == cases.ClaimVerdict.DONE
    row = ports.store.get_execution(received.message.key)
    assert (row.status, row.attempt) == (ExecutionStatus.FAILED, 4) and "stopped heartbeating" in row.error


def test_only_a_failed_execution_of_the_owner_can_be_retried(ports, clock):
    job, failed = fail_for_good(ports, clock)
    with pytest.raises(NotFound):
        retry_execution(ports, "bob", failed.execution_id)
    retry_execution(ports, "alice", failed.execution_id)
    with pytest.raises(Conflict) as twice:
        retry_execution(ports, "alice", failed.execution_id)
    assert twice.value.field == "status"
    with pytest.raises(NotFound):
        retry_execution(ports, "alice", f"{job.job_id}.0000000000001")


def test_a_cancelled_jobs_failure_cannot_be_retried(ports, clock):
    job, failed = fail_for_good(ports, clock)
    cancel_job(ports, "alice", job.job_id)
    with pytest.raises(Conflict) as refused:
        retry_execution(ports, "alice", failed.execution_id)
    assert refused.value.field == "status"


def test_a_redrive_by_ids_retries_each_and_reports_what_it_could_not(ports, clock):
    _, failed = fail_for_good(ports, clock)
    report = redrive(ports, "alice", execution_ids=[failed.execution_id, failed.execution_id, "j_00000000000000aa.x"])
    assert [e.execution_id for e in report.retried] == [failed.execution_id]
    assert [(r.execution_id, r.code) for r in report.refused] == [("j_00000000000000aa.x", "not_found")]
    again = redrive(ports, "alice", execution_ids=[failed.execution_id])
    assert again.retried == [] and again.refused[0].code == "conflict"


def test_a_filtered_redrive_retries_the_owners_matching_dead_letters_page_by_page(ports, clock):
    first, failed_first = fail_for_good(ports, clock)
    clock.advance(3600)
    second, _ = fail_for_good(ports, clock, schedule={"at": "2026-12-01T10:00:10Z"})
    _, bobs = fail_for_good(ports, clock, owner="bob", schedule={"at": "2026-12-01T10:00:15Z"})
    report = redrive(ports, "alice", selection=DeadLetterFilter(job_id=first.job_id), limit=1)
    assert report.retried == [] and report.next_cursor is not None  # the newest (the second job's) did not match
    report = redrive(
        ports, "alice", selection=DeadLetterFilter(job_id=first.job_id), limit=1, cursor=report.next_cursor
    )
    assert [e.execution_id for e in report.retried] == [failed_first.execution_id]
    assert [e.job_id for e in list_dead_letters(ports, "alice", 10, None).items] == [second.job_id]
    assert [e.execution_id for e in list_dead_letters(ports, "bob", 10, None).items] == [bobs.execution_id]


def test_a_redrive_needs_one_selection(ports, clock):
    with pytest.raises(InvalidInput):
        redrive(ports, "alice")
    with pytest.raises(InvalidInput):
        redrive(ports, "alice", execution_ids=["x"], selection=DeadLetterFilter())
    with pytest.raises(InvalidInput) as too_many:
        redrive(ports, "alice", execution_ids=[f"j_{i:016x}.0000000000001" for i in range(101)])
    assert too_many.value.field == "executionIds"
