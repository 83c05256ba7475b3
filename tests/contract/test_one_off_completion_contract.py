"""A one-off job ends when its one run ends (issue 35), on every adapter: every terminal path of that run
completes the job in the run's own write, giving its place in the owner's active-jobs quota back exactly
once, and a retry of the failed run reopens the job until that run ends again."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import timedelta

import pytest
from duetime.domain.errors import Conflict, QuotaExceeded, StaleAttempt
from duetime.domain.models import ExecutionStatus, JobSpec, JobStatus, format_time
from duetime.event_sinks import ConsoleEvents
from duetime.service.context import Ports
from duetime.service.deadletters import drain_dead_letters
from duetime.service.dispatch import preload
from duetime.service.executions import claim_execution
from duetime.service.jobs import cancel_job, run_now, submit_job
from duetime.service.ports import JobEnding
from duetime.service.redrive import retry_execution
from duetime.worker.runtime import Worker


@pytest.fixture
def loud(ports: Ports) -> tuple[Ports, ConsoleEvents]:
    """The ports with an event sink that keeps what it published, and an active-jobs quota of 3."""
    sink = ConsoleEvents(stream=io.StringIO())
    return replace(ports, events=sink, quotas=replace(ports.quotas, max_active_jobs=3)), sink


def one_off(clock, **extra: object) -> JobSpec:
    at = format_time(clock.now + timedelta(seconds=10))
    return JobSpec.model_validate({"name": "once", "handler": "demo.echo", "schedule": {"at": at}, **extra})


def run_all(ports: Ports, clock, worker: Worker, seconds: float = 10) -> list[str]:
    """Move the clock on and let the worker handle every message that is due by then."""
    clock.advance(seconds)
    outcomes = []
    while received := ports.queues.receive("default", 10, 0, 30):
        outcomes += [str(worker.process(message)) for message in received]
    worker.flush_events()  # a worker publishes a batch's events together
    return outcomes


def completions(sink: ConsoleEvents, job_id: str) -> int:
    return sum(1 for e in sink.published if e.detail_type == "Job Completed" and e.detail["jobId"] == job_id)


def test_a_succeeded_run_completes_its_job_and_gives_its_quota_place_back(loud, clock):
    ports, sink = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    job, _ = submit_job(ports, "alice", one_off(clock))
    assert ports.store.active_jobs("alice") == 1
    assert run_all(ports, clock, worker) == ["succeeded"]
    done = ports.store.get_job(job.job_id)
    assert done.status == JobStatus.COMPLETED and done.note == "its one run ended"
    assert done.version == job.version + 1
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1


def test_ten_one_off_jobs_one_after_another_all_fit_a_quota_of_three(loud, clock):
    ports, _ = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    for _ in range(10):
        job, created = submit_job(ports, "alice", one_off(clock))
        assert created
        assert run_all(ports, clock, worker) == ["succeeded"]
        assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    # The quota still binds jobs that have not ended
    for _ in range(3):
        submit_job(ports, "alice", one_off(clock))
    with pytest.raises(QuotaExceeded):
        submit_job(ports, "alice", one_off(clock))


def test_a_run_failed_after_its_last_attempt_completes_the_job_and_its_owner_is_told(loud, clock):
    ports, sink = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    retry = {"maxAttempts": 2, "baseDelaySeconds": 1, "maxDelaySeconds": 1}
    spec = one_off(clock, handler="demo.fail", payload={"times": 9}, retry=retry, pauseAfterFailures=1)
    job, _ = submit_job(ports, "alice", spec)
    # The first failure is retried (the hand clock's queues hand the retry over at once), the second is final
    assert run_all(ports, clock, worker) == ["failed", "failed"]
    done = ports.store.get_job(job.job_id)
    # Completed, not auto-paused: a one-off job has nothing left to pause
    assert done.status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1
    assert drain_dead_letters(ports, "default") == 1  # the failure notice, as for any job


def test_a_run_skipped_by_its_starting_deadline_completes_the_job(loud, clock):
    ports, sink = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    job, _ = submit_job(ports, "alice", one_off(clock, startingDeadlineSeconds=5))
    assert run_all(ports, clock, worker, 30) == ["done"]
    [row] = ports.store.executions_of_job(job.job_id)
    assert row.status == ExecutionStatus.SKIPPED and row.skip_reason == "starting deadline"
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1


def test_a_run_whose_last_attempts_worker_was_lost_completes_the_job_at_the_next_claim(loud, clock):
    ports, sink = loud
    job, _ = submit_job(ports, "alice", one_off(clock, retry={"maxAttempts": 1}))
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    message = received.message
    claim = claim_execution(ports, message, "lost-worker")  # claimed, then the worker is never heard of again
    assert claim.execution is not None and claim.execution.attempt == 1
    clock.advance(120)  # the lease has ended; no attempt is left
    again = claim_execution(ports, message, "w2")
    assert again.execution is not None and again.execution.status == ExecutionStatus.FAILED
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1


def test_a_poison_message_failed_by_the_dead_letter_drain_completes_the_job(loud, clock):
    ports, sink = loud
    job, _ = submit_job(ports, "alice", one_off(clock))
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    # SQS gave up on the message (its receive limit): it is redriven to the dead-letter queue
    ports.queues.dead_letter("default", json.loads(received.message.to_body()))
    assert drain_dead_letters(ports, "default") >= 1
    [row] = ports.store.executions_of_job(job.job_id)
    assert row.status == ExecutionStatus.FAILED
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1


def test_a_retried_failed_run_reopens_its_job_until_that_run_ends_and_completes_it_again(loud, clock):
    ports, sink = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    spec = one_off(clock, handler="demo.fail", payload={"times": 1}, retry={"maxAttempts": 1})
    job, _ = submit_job(ports, "alice", spec)
    assert run_all(ports, clock, worker) == ["failed"]
    [failed] = ports.store.executions_of_job(job.job_id)
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    retried = retry_execution(ports, "alice", failed.execution_id)
    reopened = ports.store.get_job(job.job_id)
    assert reopened.status == JobStatus.ACTIVE and reopened.note is None
    assert ports.store.active_jobs("alice") == 1
    assert [e.detail_type for e in sink.published if e.detail_type == "Job Reopened"] == ["Job Reopened"]
    assert run_all(ports, clock, worker, 1) == ["succeeded"]  # demo.fail fails `times` times, then succeeds
    [ended] = ports.store.executions_of_job(job.job_id)
    assert ended.execution_id == retried.execution_id and ended.status == ExecutionStatus.SUCCEEDED
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 2


def test_a_run_now_of_a_completed_one_off_job_is_refused_naming_status(loud, clock):
    ports, _ = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    job, _ = submit_job(ports, "alice", one_off(clock))
    run_all(ports, clock, worker)
    with pytest.raises(Conflict) as refused:
        run_now(ports, "alice", job.job_id)
    assert refused.value.field == "status"


def test_a_run_now_of_an_active_one_off_job_does_not_complete_it_its_own_run_does(loud, clock):
    ports, sink = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    job, _ = submit_job(ports, "alice", one_off(clock, schedule={"at": format_time(clock.now + timedelta(hours=1))}))
    run_now(ports, "alice", job.job_id)
    assert run_all(ports, clock, worker, 1) == ["succeeded"]
    assert ports.store.get_job(job.job_id).status == JobStatus.ACTIVE
    assert ports.store.active_jobs("alice") == 1
    clock.advance(3600)
    preload(ports, "p")
    assert "succeeded" in run_all(ports, clock, worker, 1)
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == 0
    assert completions(sink, job.job_id) == 1


def test_an_ending_is_applied_once_a_second_write_or_a_late_cancel_gives_nothing_back(loud, clock):
    ports, _ = loud
    worker = Worker(ports, "default", "w1", concurrency=1)
    job, _ = submit_job(ports, "alice", one_off(clock))
    run_all(ports, clock, worker)
    [row] = ports.store.executions_of_job(job.job_id)
    # A stale finish carrying the ending again is fenced out and changes neither the job nor the counter
    again = JobEnding(job, clock())
    with pytest.raises(StaleAttempt):
        ports.store.finish(ports.store.key_of(row), row.attempt, ExecutionStatus.SUCCEEDED, clock(), ending=again)
    assert again.changed is None
    # An ending applied to a job that has ended already writes the run alone, and counts nothing
    waiting = ports.store.end_waiting(ports.store.key_of(row), ExecutionStatus.SKIPPED, clock(), ending=again)
    assert waiting is None and again.changed is None
    cancel_job(ports, "alice", job.job_id)  # a completed job cancelled: its place was given back already
    assert ports.store.get_job(job.job_id).status == JobStatus.CANCELLED
    assert ports.store.active_jobs("alice") == 0


def test_a_cancelled_one_off_job_is_not_completed_by_its_runs_end(loud, clock):
    ports, sink = loud
    job, _ = submit_job(ports, "alice", one_off(clock))
    clock.advance(10)
    [received] = ports.queues.receive("default", 1, 0, 30)
    claim = claim_execution(ports, received.message, "w1")
    assert claim.execution is not None
    cancel_job(ports, "alice", job.job_id)
    assert ports.store.active_jobs("alice") == 0
    # The run was cancelled with its job; an ending written with another row's end finds the job ended
    ending = JobEnding(job, clock())
    other, _ = submit_job(ports, "alice", one_off(clock))
    [row] = ports.store.executions_of_job(other.job_id)
    ended = ports.store.end_waiting(ports.store.key_of(row), ExecutionStatus.SKIPPED, clock(), "test", ending=ending)
    assert ended is not None and ended.status == ExecutionStatus.SKIPPED  # the run's own write happened
    assert ending.changed is None
    assert ports.store.get_job(job.job_id).status == JobStatus.CANCELLED
    assert ports.store.active_jobs("alice") == 1  # the other job's place only
    assert completions(sink, job.job_id) == 0
