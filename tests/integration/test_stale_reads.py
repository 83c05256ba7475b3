"""The pre-loader reads jobs eventually consistently (half the read units on DynamoDB, issue 32): a job changed a
moment ago may come back as it was before the change, or not at all if it is new. Each scene hands the pre-loader
such a stale answer, on both store adapters, and shows that nothing runs that should not and nothing is lost."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from duetime.domain.models import ExecutionStatus, Job, JobSpec, JobStatus, Schedule, format_time
from duetime.domain.recurrence import is_slot, recurrence_of
from duetime.service.dispatch import preload
from duetime.service.edit import edit_job
from duetime.service.jobs import cancel_job, pause_job, submit_job
from duetime.service.outcomes import RunOutcome
from duetime.worker.runtime import Worker

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

EVERY_MINUTE = JobSpec.model_validate({"name": "m", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}})


def stale_reads(ports: Any, view: dict[str, Job | None]) -> list[bool]:
    """The next eventually consistent read of store.get_jobs answers `view` (a job as it was, or None: not there
    yet) for the jobs it names; every other read answers the store's. Returns the consistency of every read."""
    real = ports.store.get_jobs
    reads: list[bool] = []

    def get_jobs(job_ids: list[str], consistent: bool = True) -> dict[str, Job]:
        reads.append(consistent)
        found = real(job_ids, consistent)
        if consistent or reads.count(False) > 1:
            return found
        for job_id, old in view.items():
            found.pop(job_id, None)
            if old is not None and job_id in job_ids:
                found[job_id] = old
        return found

    ports.store.get_jobs = get_jobs
    return reads


def run_all(ports: Any, worker: Worker) -> list[RunOutcome]:
    outcomes = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        outcomes.extend(worker.process(received) for received in batch)
    return outcomes


def test_a_job_the_eventual_read_does_not_find_yet_is_read_again_and_its_run_is_sent(ports, clock):
    # Given a one-off due beyond the dispatch horizon, so only the pre-loader sends it
    at = clock.now + timedelta(seconds=ports.settings.preload_window_seconds + 30)
    spec = JobSpec.model_validate({"name": "o", "handler": "demo.echo", "schedule": {"at": format_time(at)}})
    job, _ = submit_job(ports, "alice", spec)
    [first] = ports.store.open_executions_of_job(job.job_id)
    # When the pre-loader's eventual read does not find it yet (written a moment ago)
    reads = stale_reads(ports, {job.job_id: None})
    clock.advance(60)
    preload(ports, "p1")
    # Then it reads that job again, strongly, and sends its run: the row is not cancelled as a deleted job's
    assert reads == [False, True]
    assert ports.store.get_execution(ports.store.key_of(first)).status == ExecutionStatus.SCHEDULED
    [received] = ports.queues.receive("default", 10, 0, 900)
    assert received.message.execution_id == first.execution_id
    clock.advance((at - clock.now).total_seconds())
    assert Worker(ports, "default", "w1", concurrency=1).process(received) == RunOutcome.SUCCEEDED
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED


def change_after_the_query(ports: Any, change: Any) -> None:
    """The next pre-load cycle's query of due rows returns, then `change` lands: what a cycle on AWS meets when a
    pause or cancel is made as it runs (and the cycle's eventual read may still answer the job as before)."""
    real = ports.store.query_due
    left = [1]

    def query_due(*args: Any) -> Any:
        found = real(*args)
        if found and left[0]:
            left[0] = 0
            change()
        return found

    ports.store.query_due = query_due


def test_a_job_paused_as_a_cycle_reads_it_has_what_the_cycle_sends_held_at_the_claim(ports, clock):
    # Given an every-minute job (its runs due within the window were sent at submit, the next one is written)
    job, _ = submit_job(ports, "alice", EVERY_MINUTE)
    before = ports.store.get_job(job.job_id)
    clock.advance(60)
    # When it is paused after the next cycle's query found its next run, and the cycle's eventual read still
    # answers the job as it was before the pause
    change_after_the_query(ports, lambda: pause_job(ports, "alice", job.job_id))
    reads = stale_reads(ports, {job.job_id: before})
    report = preload(ports, "p1")
    assert reads == [False] and report.sent >= 1 and report.created >= 1
    # Then every run sent is held at its claim, which reads the job strongly: nothing runs
    clock.advance(600)
    outcomes = run_all(ports, Worker(ports, "default", "w1", concurrency=1))
    assert outcomes and set(outcomes) == {RunOutcome.HELD}
    assert ports.store.get_job(job.job_id).status == JobStatus.PAUSED
    assert all(e.status == ExecutionStatus.SCHEDULED for e in ports.store.open_executions_of_job(job.job_id))


def test_a_job_cancelled_as_a_cycle_reads_it_has_every_row_ended_and_none_left_open(ports, clock):
    # Given an every-minute job
    job, _ = submit_job(ports, "alice", EVERY_MINUTE)
    before = ports.store.get_job(job.job_id)
    clock.advance(60)
    # When it is cancelled after the next cycle's query found its next run, and the cycle's eventual read still
    # answers the job as it was before: the next slot it plans is written after the cancel ended the open rows
    change_after_the_query(ports, lambda: cancel_job(ports, "alice", job.job_id))
    stale_reads(ports, {job.job_id: before})
    report = preload(ports, "p1")
    assert report.created >= 1
    # Then each run sent ends at its claim without running, and the next cycle, reading the job as it is, ends
    # the rows planned after the cancel: nothing runs and no row of the job is left open
    clock.advance(120)
    outcomes = run_all(ports, Worker(ports, "default", "w1", concurrency=1))
    assert outcomes and set(outcomes) == {RunOutcome.DONE}
    for _ in range(6):
        clock.advance(60)
        preload(ports, "p2")
        run_all(ports, Worker(ports, "default", "w1", concurrency=1))
    assert ports.store.open_executions_of_job(job.job_id) == []
    assert ports.store.get_job(job.job_id).status == JobStatus.CANCELLED


def test_a_row_an_edit_wrote_is_planned_under_the_new_schedule_though_the_eventual_read_answers_the_old(ports, clock):
    # Given a job every 3 minutes from its creation, edited to every even minute: the edit wrote the new schedule's
    # runs (the version of the job they were planned under is on each row)
    spec = JobSpec.model_validate({"name": "e", "handler": "demo.echo", "schedule": {"every": "3m"}})
    job, _ = submit_job(ports, "alice", spec)
    clock.advance(1)
    before = ports.store.get_job(job.job_id)
    edit_job(ports, "alice", job.job_id, before.version, {"schedule": Schedule(cron="*/2 * * * *")})
    edited = ports.store.get_job(job.job_id)
    # When the cycle that finds the new schedule's first run answers the job, eventually consistently, as it was
    # before the edit
    [first] = ports.store.open_executions_of_job(job.job_id)
    assert first.job_version == edited.version
    clock.advance((first.due_at - clock.now).total_seconds() - 5)
    reads = stale_reads(ports, {job.job_id: before})
    preload(ports, "p1")
    # Then a row newer than that answer has the job read again, strongly, and is planned under the new schedule:
    # not skipped as a slot the schedule no longer has (the old one's slots are not on even minutes), and the
    # chain goes on, on even minutes
    assert reads == [False, True]
    schedule = recurrence_of(edited.schedule, edited.created_at)
    for _ in range(8):
        clock.advance(60)
        preload(ports, "p2")
    waiting = ports.store.open_executions_of_job(job.job_id)
    assert all(is_slot(schedule, e.scheduled_at) for e in waiting)
    assert max(e.due_at for e in waiting) > clock.now
    assert ports.store.get_job(job.job_id).status == JobStatus.ACTIVE
