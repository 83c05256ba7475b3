"""Paused jobs cost the reconciler nothing: their waiting rows leave the `open` index until resume."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from duetime.adapters.aws.items import execution_to_item, job_to_item
from duetime.domain.models import Execution, Job, JobSpec, JobStatus, to_ms
from duetime.service import dispatch
from duetime.service import executions as cases
from duetime.service.dispatch import new_execution, preload
from duetime.service.jobs import pause_job, resume_job, run_now, submit_job

from tests.conftest import BOTH_BACKENDS
from tests.integration.bulk import write_directly

# With a page of 100 rows per shard and cycle (1,000 deployed), enough to need several reconciler cycles over
# the test's 4 shards: the count itself proves nothing more (10,000 at the deployed page took moto two minutes;
# 2,000 at 200 a page, 19 s of CPU, proved what 1,000 at 100 does)
PAUSED_JOBS = 1_000
PAGE_ROWS = 100


class OpenIndexReads:
    """Rows the reconciler reads, counted with botocore hooks: `open` index entries returned by Query and
    executions-table keys asked of BatchGetItem."""

    def __init__(self, ports: Any) -> None:
        self.counts: Counter[str] = Counter()
        self.executions_table = ports.store.executions_table
        events = ports.store.client.meta.events
        events.register("after-call.dynamodb.Query", self._query)
        events.register("before-parameter-build.dynamodb.BatchGetItem", self._batch_get)

    def _query(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.counts["open index entries"] += len(parsed.get("Items", []))

    def _batch_get(self, params: dict[str, Any], **_: Any) -> None:
        self.counts["execution rows"] += len(params["RequestItems"].get(self.executions_table, {}).get("Keys", []))


def paused_jobs_with_overdue_rows(ports: Any, clock: Any, count: int) -> list[Execution]:
    """`count` paused every-minute jobs, each with its waiting row overdue by two hours (missed while
    paused), as submit and dispatch left them: in the `open` index."""
    jobs: list[Job] = []
    rows: list[Execution] = []
    slot = clock.now.replace(second=0) - timedelta(hours=2)
    for i in range(count):
        job = Job(
            name=f"p{i}",
            handler="demo.echo",
            schedule={"cron": "* * * * *"},
            job_id=f"j_paused{i:06d}",
            owner="alice",
            status=JobStatus.PAUSED,
            created_at=slot - timedelta(days=1),
            updated_at=slot,
        )
        jobs.append(job)
        rows.append(new_execution(job, slot))
    write_directly(ports, ports.store.jobs_table, [job_to_item(j) for j in jobs])
    write_directly(ports, ports.store.executions_table, [execution_to_item(e, ports.store.key_of(e)) for e in rows])
    return rows


def test_a_thousand_paused_jobs_cost_the_reconciler_no_reads_per_cycle(ports, clock, monkeypatch):
    monkeypatch.setattr(dispatch, "RECONCILE_ROWS_PER_SHARD", PAGE_ROWS)
    rows = paused_jobs_with_overdue_rows(ports, clock, PAUSED_JOBS)
    reads = OpenIndexReads(ports)
    # The reconciler finds them over its first cycles (a bounded page per shard and cycle) and holds them
    held = []
    for _ in range(4):
        clock.advance(ports.settings.preload_interval_seconds)
        held.append(preload(ports, "p").held)
    assert sum(held) == PAUSED_JOBS and held[0] <= ports.settings.shards * PAGE_ROWS
    # When it runs again
    reads.counts.clear()
    for _ in range(3):
        clock.advance(ports.settings.preload_interval_seconds)
        report = preload(ports, "p")
        assert report.held == 0 and report.sent == 0
    # Then it read none of them: not one index entry, not one row
    assert reads.counts["open index entries"] == 0 and reads.counts["execution rows"] == 0
    # And the rows still wait, as a pause leaves them, for resume
    assert ports.store.get_execution(ports.store.key_of(rows[0])).status.value == "scheduled"


def test_pause_takes_the_waiting_row_out_of_the_open_index_and_resume_puts_it_back(ports, clock):
    spec = JobSpec.model_validate({"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}})
    job, _ = submit_job(ports, "alice", spec)
    [waiting] = ports.store.executions_of_job(job.job_id)
    shard = int(ports.store.key_of(waiting).pk.rsplit("#", 1)[1])
    until = 2**42

    def in_open_index() -> list[str]:
        return [e.execution_id for e in ports.store.open_page(shard, until, 100).executions]

    def sweep_through(until) -> None:  # the pre-loader's sweep once `until` is overdue (dispatch.sweep)
        dispatch.sweep(ports, shard, to_ms(until - timedelta(hours=1)), to_ms(until))

    sweep_through(waiting.due_at)
    assert in_open_index() == [waiting.execution_id]
    pause_job(ports, "alice", job.job_id)
    assert in_open_index() == []
    # The paused job's waiting row is still its open row (cancel and resume find it)
    assert [e.execution_id for e in ports.store.open_executions_of_job(job.job_id)] == [waiting.execution_id]
    clock.advance(10 * 60)
    view = resume_job(ports, "alice", job.job_id)
    assert view.job.status == JobStatus.ACTIVE
    # Resumed: the missed slot runs (catch-up latest) and the next waits, both where the reconciler looks
    open_now = ports.store.open_executions_of_job(job.job_id)
    assert len(open_now) == 2
    sweep_through(open_now[1].due_at)  # in the index once the sweep passes their time, should they still wait
    assert sorted(in_open_index()) == sorted(e.execution_id for e in open_now)


def claimed_one_off(ports: Any, clock: Any) -> tuple[Job, Any, cases.DueMessage, Any]:
    """A one-off job of alice's due a second on, and its one run claimed by w1 once due: the job, the run's key,
    its message and the claim."""
    due = clock.now + timedelta(seconds=1)
    spec = JobSpec.model_validate({"name": "o", "handler": "demo.echo", "schedule": {"at": due.isoformat()}})
    job, _ = submit_job(ports, "alice", spec)
    [scheduled] = ports.store.executions_of_job(job.job_id)
    clock.advance(2)
    key = ports.store.key_of(scheduled)
    message = cases.DueMessage.for_execution(scheduled, key)
    claim = cases.claim_execution(ports, message, "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED and claim.execution is not None
    return job, key, message, claim


@BOTH_BACKENDS
def test_a_paused_one_off_whose_run_ends_gives_its_held_run_now_back_to_the_reconciler(ports, clock):
    """A one-off job is run now and paused while its one run runs; that run ends, so the job completes (nothing
    resumes it then). Its run-now row, held by the pause, must not wait out of the reconciler's sight for good
    (the simulation, seed 4162 with --edits --run-now --backfill --spread): it goes back to the `open` index
    before the job completes, and runs."""
    job, key, _, claim = claimed_one_off(ports, clock)
    manual = run_now(ports, "alice", job.job_id)
    shard = int(ports.store.key_of(manual).pk.rsplit("#", 1)[1])
    clock.advance(60)
    swept_to = to_ms(clock.now)
    dispatch.sweep(ports, shard, to_ms(manual.due_at - timedelta(hours=1)), swept_to)  # the sweep passes it
    pause_job(ports, "alice", job.job_id)
    assert manual.execution_id not in [e.execution_id for e in ports.store.open_page(shard, 2**42, 100).executions]
    cases.complete(ports, key, claim.execution.attempt, succeeded=True, claim_token=claim.execution.claim_token)
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    clock.advance(10 * 60)
    dispatch.sweep(ports, shard, swept_to, to_ms(clock.now))  # later sweeps start where the last one ended
    assert manual.execution_id in [e.execution_id for e in ports.store.open_page(shard, 2**42, 100).executions]


@BOTH_BACKENDS
def test_a_run_ended_with_the_job_read_at_its_claim_still_gives_a_pause_since_its_held_rows_back(ports, clock):
    """As above, but the worker ends the run with the job as it read it at the claim (active), as the runtime
    does: the write's job condition (the status read) refuses the completion, the run's end is written alone,
    and the job is read again and completed as it stands, its held run-now row given back to the `open` index
    first. The job completes once, and its owner's place in the active-jobs quota comes back once."""
    job, key, _, claim = claimed_one_off(ports, clock)
    active_before = ports.store.active_jobs("alice")
    assert claim.job is not None
    manual = run_now(ports, "alice", job.job_id)
    shard = int(ports.store.key_of(manual).pk.rsplit("#", 1)[1])
    clock.advance(60)
    swept_to = to_ms(clock.now)
    dispatch.sweep(ports, shard, to_ms(manual.due_at - timedelta(hours=1)), swept_to)
    pause_job(ports, "alice", job.job_id)
    assert manual.execution_id not in [e.execution_id for e in ports.store.open_page(shard, 2**42, 100).executions]
    assert claim.job.status == JobStatus.ACTIVE  # what the worker holds: read before the pause
    ended = cases.complete(
        ports,
        key,
        claim.execution.attempt,
        succeeded=False,
        error="boom",
        retryable=False,
        job=claim.job,
        current=claim.execution,
        claim_token=claim.execution.claim_token,
    )
    assert ended.status.value == "failed"
    stored = ports.store.get_job(job.job_id)
    assert stored is not None and stored.status == JobStatus.COMPLETED
    assert ports.store.active_jobs("alice") == active_before - 1
    clock.advance(10 * 60)
    dispatch.sweep(ports, shard, swept_to, to_ms(clock.now))
    assert manual.execution_id in [e.execution_id for e in ports.store.open_page(shard, 2**42, 100).executions]


@BOTH_BACKENDS
def test_a_one_off_whose_runs_end_died_after_its_write_is_completed_when_the_message_comes_again(ports, clock):
    """The simulation, seed 150 with --limits: a one-off job paused while its one run ran; the run's end wrote the
    row but not the completion (the job was no longer in the status its worker read), and the worker died before
    completing the job as it stood. The run's message comes again (it was never deleted): its claim finds the
    row ended and completes the job, paused or not."""
    from tests.integration.test_dispatch_faults import Died, fail_after

    job, key, message, claim = claimed_one_off(ports, clock)
    pause_job(ports, "alice", job.job_id)
    fail_after(ports, "finish")
    with pytest.raises(Died):
        cases.complete(
            ports,
            key,
            claim.execution.attempt,
            succeeded=True,
            job=claim.job,
            current=claim.execution,
            claim_token=claim.execution.claim_token,
        )
    assert ports.store.get_job(job.job_id).status == JobStatus.PAUSED  # the row ended, the job did not
    again = cases.claim_execution(ports, message, "w2")
    assert again.verdict == cases.ClaimVerdict.DONE
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
