"""Operating jobs through the service, on every adapter: spread runs (jitterSeconds), bounded schedules
(startAt, endAt, maxRuns -> `completed`), auto-pause after failures, run-now with a payload, tags and
filtered listings, and schedule health."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from duetime.domain.errors import Conflict, InvalidInput
from duetime.domain.models import ExecutionStatus, JobSpec, JobStatus
from duetime.domain.spread import spread_due
from duetime.service import executions as cases
from duetime.service.dispatch import preload
from duetime.service.jobs import (
    get_job,
    job_filter,
    list_jobs,
    pause_job,
    resume_job,
    run_now,
    submit_job,
)

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


def spec(**overrides: object) -> JobSpec:
    body: dict[str, object] = {"name": "ops", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}}
    body.update(overrides)
    return JobSpec.model_validate(body)


def run_due(ports, clock, succeed: bool = True) -> list[ExecutionStatus]:
    """One pre-load cycle, then every message received is claimed and (if claimed) completed."""
    preload(ports, "p1")
    ended = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        ended.extend(_run_all(ports, batch, succeed))
    return ended


def _run_all(ports, batch, succeed: bool) -> list[ExecutionStatus]:
    ended = []
    for received in batch:
        claim = cases.claim_execution(ports, received.message, "w1")
        if claim.verdict == cases.ClaimVerdict.CLAIMED:
            assert claim.execution is not None
            done = cases.complete(
                ports,
                received.message.key,
                claim.execution.attempt,
                succeeded=succeed,
                error=None if succeed else "boom",
                retryable=False,
                job=claim.job,
                current=claim.execution,
            )
            ended.append(done.status)
        ports.queues.delete("default", received.receipt)
    return ended


def one_run_claimed(ports, clock):
    """A `maxRuns: 1` every-minute job whose one run, a minute on, is pre-loaded, received and claimed by w1: the
    job, the received message and the claim."""
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "* * * * *", "maxRuns": 1}))
    clock.advance(60)
    preload(ports, "p1")
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = cases.claim_execution(ports, received.message, "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED and claim.execution is not None
    return job, received, claim


def history(ports, job_id: str):
    return ports.store.executions_of_job(job_id, newest_first=False, limit=100)


# -- spread ---------------------------------------------------------------------------------------------


def test_jobs_with_a_spread_are_due_at_their_slot_plus_a_stable_delay_within_it(ports, clock):
    # Given 40 hourly jobs spread over 300 s
    jobs = [submit_job(ports, "alice", spec(schedule={"cron": "0 * * * *"}, jitterSeconds=300))[0] for _ in range(40)]
    slot = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    dues = []
    for job in jobs:
        [first] = history(ports, job.job_id)
        # Then scheduledAt stays the slot and dueAt carries the job's own delay, within the spread
        assert first.scheduled_at == slot and first.due_at == spread_due(job.job_id, slot, 300)
        assert slot <= first.due_at < slot + timedelta(seconds=300)
        view = get_job(ports, "alice", job.job_id)
        assert view.job.next_run_at == first.due_at
        hours = [slot + timedelta(hours=h) for h in range(5)]
        assert view.next_runs == [spread_due(job.job_id, at, 300) for at in hours]  # each as it will be due
        dues.append(first.due_at)
    assert len(set(dues)) > 30  # spread across jobs, not one instant
    # When the hour comes and every run is dispatched and run
    clock.now = slot + timedelta(seconds=301)
    assert run_due(ports, clock) == [ExecutionStatus.SUCCEEDED] * 40
    # Then each ran as a plain scheduled run (not as a late catch-up), and the next slot is spread too
    for job in jobs:
        first, second = history(ports, job.job_id)
        assert first.kind == "scheduled" and first.status == ExecutionStatus.SUCCEEDED
        assert second.scheduled_at == slot + timedelta(hours=1)
        assert second.due_at == spread_due(job.job_id, second.scheduled_at, 300)


def test_a_run_now_is_never_spread_and_a_spread_at_least_the_period_is_refused(ports, clock):
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "0 * * * *"}, jitterSeconds=3000))
    manual = run_now(ports, "alice", job.job_id)
    assert manual.due_at == clock.now == manual.scheduled_at
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", spec(schedule={"every": "5m"}, jitterSeconds=300))
    assert refused.value.field == "jitterSeconds"
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", spec(schedule={"cron": "0,10 * * * *"}, jitterSeconds=600))
    assert refused.value.field == "jitterSeconds"


# -- bounds ---------------------------------------------------------------------------------------------


def test_max_runs_ends_the_job_completed_after_its_last_run_without_a_further_slot(ports, clock):
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "* * * * *", "maxRuns": 3}))
    assert len(get_job(ports, "alice", job.job_id).next_runs) == 3  # the runs left, not five
    for _ in range(3):
        clock.advance(60)
        assert run_due(ports, clock) == [ExecutionStatus.SUCCEEDED]
    rows = history(ports, job.job_id)
    assert [r.run_number for r in rows] == [1, 2, 3]
    assert [r.status for r in rows] == [ExecutionStatus.SUCCEEDED] * 3
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED
    # And nothing runs again
    clock.advance(600)
    assert run_due(ports, clock) == [] and len(history(ports, job.job_id)) == 3
    with pytest.raises(Conflict):
        resume_job(ports, "alice", job.job_id)


def test_end_at_and_start_at_bound_a_cron_schedule_and_catch_up_respects_them(ports, clock):
    # Given a job every minute from 09:05 to 09:07 (inclusive), catch-up `all`
    start, end = clock.now + timedelta(minutes=5), clock.now + timedelta(minutes=7)
    body = {"cron": "* * * * *", "startAt": start.isoformat(), "endAt": end.isoformat()}
    job, _ = submit_job(ports, "alice", spec(schedule=body, catchUp="all"))
    [first] = history(ports, job.job_id)
    assert first.scheduled_at == start
    # When the system was down until 09:20 and then runs what it missed
    clock.now = start + timedelta(minutes=15)
    for _ in range(3):
        run_due(ports, clock)
    # Then exactly the three slots within the bounds ran, none after endAt, and the job is completed
    slots = sorted(r.scheduled_at for r in history(ports, job.job_id) if r.status == ExecutionStatus.SUCCEEDED)
    assert slots == [start, start + timedelta(minutes=1), end]
    assert all(r.scheduled_at <= end for r in history(ports, job.job_id))
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED


def test_bounds_on_a_one_off_or_an_end_before_the_first_run_are_refused_naming_the_field(ports, clock):
    at = (clock.now + timedelta(hours=1)).isoformat()
    for name, value in (("startAt", at), ("endAt", at), ("maxRuns", 2)):
        with pytest.raises(InvalidInput) as refused:
            submit_job(ports, "alice", spec(schedule={"at": at, name: value}))
        assert refused.value.field == f"schedule.{name}"
    with pytest.raises(InvalidInput) as refused:
        submit_job(ports, "alice", spec(schedule={"cron": "0 0 * * *", "endAt": at}))
    assert refused.value.field == "schedule.endAt"


# -- auto-pause -----------------------------------------------------------------------------------------


def test_consecutive_failed_runs_pause_the_job_with_a_note_and_a_success_resets_the_count(ports, clock):
    job, _ = submit_job(ports, "alice", spec(pauseAfterFailures=2, retry={"maxAttempts": 1}))
    clock.advance(60)
    assert run_due(ports, clock, succeed=False) == [ExecutionStatus.FAILED]
    clock.advance(60)
    assert run_due(ports, clock, succeed=True) == [ExecutionStatus.SUCCEEDED]  # the streak is broken
    clock.advance(60)
    assert run_due(ports, clock, succeed=False) == [ExecutionStatus.FAILED]
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.ACTIVE
    clock.advance(60)
    assert run_due(ports, clock, succeed=False) == [ExecutionStatus.FAILED]
    paused = get_job(ports, "alice", job.job_id).job
    assert paused.status == JobStatus.PAUSED
    assert paused.note is not None and "2 consecutive failed runs" in paused.note
    # And while paused nothing runs; resuming with a note replaces the reason
    clock.advance(60)
    assert run_due(ports, clock) == []
    resumed = resume_job(ports, "alice", job.job_id, note="fixed the credentials").job
    assert resumed.status == JobStatus.ACTIVE and resumed.note == "fixed the credentials"
    assert pause_job(ports, "alice", job.job_id, note="maintenance").job.note == "maintenance"


def test_a_failure_pauses_its_job_though_many_rows_of_later_slots_wait_ahead_of_it(ports, clock):
    # A frequent schedule keeps rows of its coming slots (pre-created, backfilled, run-now) newer than the
    # run that failed: they are not runs, and the failure behind them must still count (a `*/5 s` job with
    # pauseAfterFailures 1 once stayed active, its failure read past by a page of waiting rows).
    from duetime.service.dispatch import new_execution

    job, _ = submit_job(ports, "alice", spec(pauseAfterFailures=1, retry={"maxAttempts": 1}))
    [first] = ports.store.executions_of_job(job.job_id)
    for minute in range(2, 40):
        assert ports.store.put_execution(new_execution(job, first.scheduled_at + timedelta(minutes=minute)))
    clock.advance(60)
    assert run_due(ports, clock, succeed=False) == [ExecutionStatus.FAILED]
    paused = get_job(ports, "alice", job.job_id).job
    assert paused.status == JobStatus.PAUSED and paused.note is not None, paused


# -- run now with a payload -----------------------------------------------------------------------------


def test_a_run_now_payload_is_stored_on_that_execution_only(ports, clock):
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "0 0 * * *"}, payload={"region": "US"}))
    manual = run_now(ports, "alice", job.job_id, payload={"region": "EU"})
    [received] = ports.queues.receive("default", 10, 0, 30)
    claim = cases.claim_execution(ports, received.message, "w1")
    assert claim.execution is not None and claim.execution.payload == {"region": "EU"}
    assert cases.find_execution(ports, manual.execution_id).payload == {"region": "EU"}
    assert get_job(ports, "alice", job.job_id).job.payload == {"region": "US"}
    scheduled = next(r for r in history(ports, job.job_id) if r.kind == "scheduled")
    assert scheduled.payload is None  # the scheduled run uses the job's


def test_an_ecs_job_runs_now_only_with_its_own_payload(ports, clock):
    # An ecs: task reads its job's payload from the jobs table (never its environment): one run's payload
    # would not reach it, so it is refused rather than silently replaced by the job's.
    job, _ = submit_job(ports, "alice", spec(handler="ecs:report-builder", payload={"region": "US"}))
    with pytest.raises(InvalidInput) as refused:
        run_now(ports, "alice", job.job_id, payload={"region": "EU"})
    assert refused.value.field == "payload"
    assert run_now(ports, "alice", job.job_id).payload is None


# -- tags and filtered listings -------------------------------------------------------------------------


def test_jobs_are_listed_by_status_handler_and_tags_within_the_owner_and_paged_correctly(ports, clock):
    made = []
    for i in range(12):
        tags = {"team": "billing" if i % 2 == 0 else "search", "tier": "gold" if i % 3 == 0 else "std"}
        handler = "demo.echo" if i % 4 else "demo.sleep"
        made.append(submit_job(ports, "alice", spec(name=f"j{i}", handler=handler, tags=tags))[0])
    pause_job(ports, "alice", made[0].job_id)
    submit_job(ports, "bob", spec(tags={"team": "billing"}))  # another owner's: never listed

    def listed(page_size: int, **filters: object) -> list[str]:
        wanted = job_filter(filters.get("status"), filters.get("handler"), filters.get("tags", []))
        ids: list[str] = []
        cursor = None
        while True:
            jobs, cursor = list_jobs(ports, "alice", page_size, cursor, wanted)
            ids.extend(j.job_id for j in jobs)
            if cursor is None:
                return ids

    newest_first = [j.job_id for j in reversed(made)]
    billing = [j for i, j in zip(range(11, -1, -1), newest_first, strict=True) if i % 2 == 0]
    assert listed(2, tags=["team:billing"]) == billing
    assert listed(100, tags=["team:billing"]) == billing
    gold_billing = [made[i].job_id for i in (6, 0)]
    assert listed(1, tags=["team:billing", "tier:gold"]) == gold_billing
    assert listed(3, handler="demo.sleep") == [made[i].job_id for i in (8, 4, 0)]
    assert listed(5, status="paused") == [made[0].job_id]
    assert listed(5, status="paused", handler="demo.echo") == []
    assert listed(4) == newest_first
    for bad, field in ((("nope", None, []), "status"), ((None, None, ["team"]), "tag"), ((None, "", []), "handler")):
        with pytest.raises(InvalidInput) as refused:
            job_filter(*bad)
        assert refused.value.field == field


def test_tags_are_bounded(ports, clock):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="tags"):
        spec(tags={f"k{i}": "v" for i in range(21)})
    with pytest.raises(ValidationError, match="tag key"):
        spec(tags={"team:x": "v"})
    with pytest.raises(ValidationError, match="value over"):
        spec(tags={"team": "v" * 257})


# -- health ---------------------------------------------------------------------------------------------


def test_health_shows_the_last_run_success_and_failure_and_a_run_past_due(ports, clock):
    job, _ = submit_job(ports, "alice", spec(retry={"maxAttempts": 1}))
    fresh = get_job(ports, "alice", job.job_id)
    assert fresh.health is not None and fresh.health.last_run is None and fresh.health.past_due is None
    clock.advance(60)
    run_due(ports, clock, succeed=True)
    clock.advance(60)
    run_due(ports, clock, succeed=False)
    health = get_job(ports, "alice", job.job_id).health
    assert health is not None and health.last_success is not None and health.last_failure is not None
    assert health.last_success.status == ExecutionStatus.SUCCEEDED
    assert health.last_failure.error == "boom"
    assert health.last_run is not None and health.last_run.execution_id == health.last_failure.execution_id
    assert health.past_due is None
    assert len(get_job(ports, "alice", job.job_id).next_runs) == 5
    # When nothing dispatches the waiting run for five minutes, the job shows it past due
    clock.advance(300)
    late = get_job(ports, "alice", job.job_id).health
    assert late is not None and late.past_due is not None and late.past_due.status == ExecutionStatus.SCHEDULED


def test_a_sparse_filter_pages_through_many_index_pages_without_skipping_or_repeating(ports, clock, monkeypatch):
    # DynamoDB applies Limit before the filter: with tiny index pages, a sparse match spans many of them
    monkeypatch.setattr("duetime.adapters.aws.jobs.FILTERED_PAGE", 2)
    monkeypatch.setattr("duetime.adapters.aws.jobs.FILTERED_ROUNDS", 3)
    made = [
        submit_job(ports, "alice", spec(name=f"s{i}", tags={"rare": "yes"} if i % 5 == 0 else {}))[0] for i in range(23)
    ]
    wanted = [j.job_id for j in reversed(made) if j.tags]
    for page_size in (1, 2, 3, 100):
        seen: list[str] = []
        cursor = None
        for _ in range(50):
            jobs, cursor = list_jobs(ports, "alice", page_size, cursor, job_filter(None, None, ["rare:yes"]))
            assert len(jobs) <= page_size
            seen.extend(j.job_id for j in jobs)
            if cursor is None:
                break
        assert seen == wanted, page_size


def test_the_audit_finds_no_broken_chain_while_a_bounded_jobs_last_run_runs_or_once_it_completed(ports, clock):
    from duetime.service.audit import audit

    job, received, claim = one_run_claimed(ports, clock)
    # While the last run runs, no next slot exists and that is no broken chain
    assert [f for f in audit(ports).findings if f.check == "cron chain broken"] == []
    cases.complete(ports, received.message.key, 1, succeeded=True, current=claim.execution)  # read the job itself
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED
    assert audit(ports).findings == []


@pytest.mark.parametrize("policy", ["latest", "none"])
def test_catch_up_after_an_outage_stops_at_max_runs(ports, clock, policy):
    # Given a job with 3 runs allowed whose every slot was missed (an outage of ten minutes)
    job, _ = submit_job(ports, "alice", spec(schedule={"cron": "* * * * *", "maxRuns": 3}, catchUp=policy))
    [first] = history(ports, job.job_id)
    clock.now = first.scheduled_at + timedelta(minutes=10)
    for _ in range(2):
        run_due(ports, clock)
    rows = history(ports, job.job_id)
    ran = [r.scheduled_at for r in rows if r.status == ExecutionStatus.SUCCEEDED]
    # Then `latest` runs the third slot (the latest within the bounds), `none` runs nothing
    assert ran == ([first.scheduled_at + timedelta(minutes=2)] if policy == "latest" else [])
    assert all(r.scheduled_at <= first.scheduled_at + timedelta(minutes=2) for r in rows)
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED


def test_a_bounded_jobs_last_run_replaced_by_an_earlier_slots_run_completes_the_job(ports, clock):
    """Runs late after an outage may be claimed in any order: with overlap `replace`, the earlier slot's claim ends
    the last slot's run (`replaced`), and the job must complete then, as its last run's end would have done
    (simulation seed 180, --bounded). It stayed active with nothing to run, for good."""
    job, _ = submit_job(ports, "alice", spec(schedule={"every": "10s", "maxRuns": 2}, overlap="replace"))
    clock.advance(10.1)
    preload(ports, "p1")  # the first slot's message, and the second's row
    clock.advance(10)
    preload(ports, "p1")
    received = {r.message.execution_id: r.message for r in ports.queues.receive("default", 10, 0, 30)}
    first, last = sorted(received)
    claimed_last = cases.claim_execution(ports, received[last], "w1")
    assert claimed_last.verdict == cases.ClaimVerdict.CLAIMED
    assert cases.claim_execution(ports, received[first], "w2").verdict == cases.ClaimVerdict.CLAIMED
    rows = {r.execution_id: r for r in history(ports, job.job_id)}
    assert (rows[last].status, rows[last].skip_reason) == (ExecutionStatus.CANCELLED, "replaced")
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED


def test_a_bounded_jobs_last_run_whose_end_died_after_its_write_completes_the_job_when_its_message_comes_again(
    ports, clock
):
    """The last run's end wrote its row, then its worker died before completing the job: the message, never
    deleted, comes again, and its claim finds the row ended and completes the job (no read: the claim returns the
    row it could not take)."""
    from tests.integration.test_dispatch_faults import Died, fail_after

    job, received, claim = one_run_claimed(ports, clock)
    fail_after(ports, "finish")
    with pytest.raises(Died):
        cases.complete(ports, received.message.key, claim.execution.attempt, succeeded=True, job=claim.job)
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.ACTIVE
    assert cases.claim_execution(ports, received.message, "w2").verdict == cases.ClaimVerdict.DONE
    assert get_job(ports, "alice", job.job_id).job.status == JobStatus.COMPLETED
