"""Delivery per job (issue 34): an at-most-once job never starts one slot twice. A lost worker's run ends
with its result unknown, a reported failure is not retried, a run that started is never retried or
redriven, and a waiting run some attempt claimed before is skipped. On both store adapters."""

from __future__ import annotations

import json

import pytest
from duetime.domain.errors import Conflict, InvalidInput
from duetime.domain.models import RESULT_UNKNOWN, Delivery, ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.deadletters import drain_dead_letters
from duetime.service.edit import edit_job
from duetime.service.jobs import submit_job
from duetime.service.redrive import redrive, retry_execution

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


def spec(**overrides):
    body = {
        "name": "pay",
        "handler": "demo.echo",
        "schedule": {"at": "2026-12-01T09:00:05Z"},
        "delivery": "at-most-once",
    }
    body.update(overrides)
    return JobSpec.model_validate(body, by_alias=True, by_name=False)


def the_message(ports):
    [received] = ports.queues.receive("default", 10, 0, 30)
    return received.message


def test_delivery_defaults_to_at_least_once_and_at_most_once_has_no_retries(ports):
    plain, _ = submit_job(ports, "alice", spec(delivery="at-least-once"))
    bare = JobSpec.model_validate({"name": "n", "handler": "h", "schedule": {"every": "1m"}})
    assert bare.delivery == Delivery.AT_LEAST_ONCE
    once, _ = submit_job(ports, "alice", spec())
    assert plain.retry.max_attempts == 3
    # An unset retry policy gives one attempt, stored so on both backends
    stored = ports.store.get_job(once.job_id)
    assert stored.delivery == Delivery.AT_MOST_ONCE and stored.retry.max_attempts == 1


def test_at_most_once_with_retries_is_refused_naming_the_field(ports):
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", spec(retry={"maxAttempts": 2}))
    assert refused.value.field == "retry.maxAttempts"
    # maxAttempts 1 given with it is fine
    job, _ = submit_job(ports, "alice", spec(retry={"maxAttempts": 1, "baseDelaySeconds": 5}))
    assert job.retry.max_attempts == 1


def test_a_lost_worker_ends_the_run_with_its_result_unknown_never_started_again(ports, clock):
    # Given an at-most-once run claimed by w1, whose worker is lost (its lease ends unrenewed)
    job, _ = submit_job(ports, "alice", spec())
    clock.advance(5)
    message = the_message(ports)
    first = cases.claim_execution(ports, message, "w1")
    assert first.verdict == cases.ClaimVerdict.CLAIMED and first.execution.attempt == 1
    clock.advance(31)
    # When its message comes back
    again = cases.claim_execution(ports, message, "w2")
    # Then no second attempt starts: the run ends failed, its attempt's outcome unknown, and the owner is told
    assert again.verdict == cases.ClaimVerdict.DONE
    row = ports.store.get_execution(message.key)
    assert row.status == ExecutionStatus.FAILED and row.attempt == 1
    assert [a.outcome for a in row.attempts] == [RESULT_UNKNOWN] and row.error.startswith("result unknown")
    [(notice, _)] = ports.queues.receive_dead_letters("default")
    assert notice["executionId"] == row.execution_id and notice["owner"] == "alice"
    # And any later copy of the message starts nothing
    assert cases.claim_execution(ports, message, "w3").verdict == cases.ClaimVerdict.DONE
    assert ports.store.get_execution(message.key).attempt == 1
    # And neither a retry nor a redrive may start it again: 409 naming delivery
    with pytest.raises(Conflict) as refused:
        retry_execution(ports, "alice", row.execution_id)
    assert refused.value.field == "delivery"
    report = redrive(ports, "alice", execution_ids=[row.execution_id])
    assert report.retried == [] and [r.execution_id for r in report.refused] == [row.execution_id]
    assert ports.store.get_execution(message.key).status == ExecutionStatus.FAILED
    assert job.delivery == Delivery.AT_MOST_ONCE


def test_an_at_least_once_run_is_taken_over_after_a_lost_worker(ports, clock):
    # The same loss under the default delivery: the next claim starts attempt 2
    submit_job(ports, "alice", spec(delivery="at-least-once"))
    clock.advance(5)
    message = the_message(ports)
    cases.claim_execution(ports, message, "w1")
    clock.advance(31)
    again = cases.claim_execution(ports, message, "w2")
    assert again.verdict == cases.ClaimVerdict.CLAIMED and again.execution.attempt == 2


def test_a_released_run_of_a_clean_stop_is_not_started_again(ports, clock):
    # A clean stop releases what did not finish in its grace period: at-most-once, its result is unknown
    submit_job(ports, "alice", spec())
    clock.advance(5)
    message = the_message(ports)
    claim = cases.claim_execution(ports, message, "w1")
    assert cases.release(ports, message.key, 1, claim.execution.claim_token)
    again = cases.claim_execution(ports, message, "w2")
    assert again.verdict == cases.ClaimVerdict.DONE
    assert again.execution.status == ExecutionStatus.FAILED and again.execution.attempts[-1].outcome == RESULT_UNKNOWN


def test_a_reported_failure_is_not_retried(ports, clock):
    # Given an at-most-once run whose handler reports a retryable failure
    submit_job(ports, "alice", spec())
    clock.advance(5)
    message = the_message(ports)
    claim = cases.claim_execution(ports, message, "w1")
    ended = cases.complete(ports, message.key, 1, succeeded=False, error="boom", retryable=True)
    # Then it ends failed at once (a retry would be a second start), its outcome the reported one
    assert ended.status == ExecutionStatus.FAILED and ended.attempts[-1].outcome == "failed"
    assert ports.queues.receive("default", 10, 0, 30) == []
    with pytest.raises(Conflict) as refused:
        retry_execution(ports, "alice", claim.execution.execution_id)
    assert refused.value.field == "delivery"


def test_a_waiting_retry_of_a_job_made_at_most_once_is_skipped_as_started_before(ports, clock):
    # Given an at-least-once run that failed once and waits for its retry
    job, _ = submit_job(
        ports,
        "alice",
        spec(delivery="at-least-once", retry={"maxAttempts": 3, "baseDelaySeconds": 0, "maxDelaySeconds": 0}),
    )
    clock.advance(5)
    message = the_message(ports)
    cases.claim_execution(ports, message, "w1")
    clock.advance(1)  # the retry is due now: a moment after the first attempt's due time
    waiting = cases.complete(ports, message.key, 1, succeeded=False, error="boom")
    assert waiting.status == ExecutionStatus.SCHEDULED and waiting.attempt == 1
    # When the job is made at-most-once (no retry policy given: it gets maxAttempts 1)
    edited = edit_job(ports, "alice", job.job_id, job.version, {"delivery": Delivery.AT_MOST_ONCE})
    assert edited.job.retry.max_attempts == 1
    # Then the waiting retry is not started: it is skipped, it might have been started
    retry_message = the_message(ports)
    claim = cases.claim_execution(ports, retry_message, "w2")
    assert claim.verdict == cases.ClaimVerdict.DONE
    assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == cases.STARTED_BEFORE
    assert claim.execution.attempt == 1


def test_a_poison_message_of_a_lost_at_most_once_run_records_its_result_unknown(ports, clock):
    # Given an at-most-once run whose worker was lost, and its message redriven to the DLQ by SQS
    submit_job(ports, "alice", spec())
    clock.advance(5)
    message = the_message(ports)
    cases.claim_execution(ports, message, "w1")
    clock.advance(31)
    ports.queues.dead_letter("default", json.loads(message.to_body()))
    # When the DLQ drain handles it
    drain_dead_letters(ports, "default")
    # Then the run ends failed with its result unknown
    row = ports.store.get_execution(message.key)
    assert row.status == ExecutionStatus.FAILED and row.attempts[-1].outcome == RESULT_UNKNOWN
