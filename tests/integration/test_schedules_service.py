"""Schedules through the service on both backends: overlap, pause and resume with catch-up, cancel, run now,
exclusions and named calendars."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.definitions import MAX_CALENDARS_PER_OWNER
from duetime.domain.errors import Conflict, InvalidInput, NotFound, StaleAttempt
from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.calendars import delete_calendar, list_calendars, put_calendar
from duetime.service.dispatch import preload
from duetime.service.jobs import cancel_job, get_job, pause_job, resume_job, run_now, submit_job

from tests.conftest import BOTH_BACKENDS

# The use-cases behave the same on every adapter.
pytestmark = BOTH_BACKENDS


def cron_job(ports, **overrides):
    body = {"name": "c", "handler": "demo.echo", "schedule": {"cron": "* * * * *", "timeZone": "UTC"}}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def drain(ports):
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += batch
    return out


def history(ports, job_id):
    return sorted(ports.store.executions_of_job(job_id, limit=100), key=lambda e: e.execution_id)


def test_forbid_records_the_next_run_skipped_while_the_previous_runs(ports, clock):
    # Given an every-minute job whose 09:01 run is still running at 09:02
    cron_job(ports, overlap="forbid")
    clock.advance(60)
    preload(ports, "p")
    first = next(r for r in drain(ports) if r.message.due_ms == int(clock.now.timestamp() * 1000))
    assert cases.claim_execution(ports, first.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    clock.advance(40)
    cases.heartbeat(ports, first.message.key, 1)
    clock.advance(20)
    preload(ports, "p")
    second = next(r for r in drain(ports) if r.message.due_ms == int(clock.now.timestamp() * 1000))
    # When the 09:02 run is claimed
    claim = cases.claim_execution(ports, second.message, "w2")
    # Then it is recorded skipped with reason overlap, and the first still runs
    assert claim.verdict == cases.ClaimVerdict.DONE
    assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == "overlap"
    assert ports.store.get_execution(first.message.key).status == ExecutionStatus.RUNNING


def test_replace_ends_the_running_attempt_which_is_then_fenced_out(ports, clock):
    job = cron_job(ports, overlap="replace")
    clock.advance(60)
    preload(ports, "p")
    first = next(r for r in drain(ports) if r.message.due_ms == int(clock.now.timestamp() * 1000))
    cases.claim_execution(ports, first.message, "w1")
    clock.advance(40)
    cases.heartbeat(ports, first.message.key, 1)
    clock.advance(20)
    preload(ports, "p")
    second = next(r for r in drain(ports) if r.message.due_ms == int(clock.now.timestamp() * 1000))
    assert cases.claim_execution(ports, second.message, "w2").verdict == cases.ClaimVerdict.CLAIMED
    old = ports.store.get_execution(first.message.key)
    assert old.status == ExecutionStatus.CANCELLED and old.skip_reason == "replaced"
    with pytest.raises(StaleAttempt):
        cases.heartbeat(ports, first.message.key, 1)
    assert job.job_id


def test_a_paused_jobs_queued_message_is_not_run_and_resume_catches_up_latest(ports, clock):
    # Given an every-minute job whose first run is queued, then paused
    job = cron_job(ports, catchUp="latest")
    clock.advance(55)
    preload(ports, "p")
    pause_job(ports, "alice", job.job_id)
    clock.advance(5)
    [queued] = [r for r in drain(ports) if r.message.job_id == job.job_id][:1]
    assert cases.claim_execution(ports, queued.message, "w1").verdict == cases.ClaimVerdict.HELD
    # And the pre-loader dispatches nothing for it while paused
    clock.advance(240)
    preload(ports, "p")
    assert [r for r in drain(ports) if r.message.job_id == job.job_id] == []
    # When it is resumed after missing 09:01..09:05 (five slots)
    resume_job(ports, "alice", job.job_id)
    sent = [r for r in drain(ports) if r.message.job_id == job.job_id]
    # Then only the latest missed slot (09:05) runs now; skip records account for the 4 others
    rows = history(ports, job.job_id)
    skipped = [e for e in rows if e.status == ExecutionStatus.SKIPPED]
    assert sum(e.skipped_count or 1 for e in skipped) == 4
    assert {e.skip_reason for e in skipped} == {"catch-up latest"}
    latest_id = f"{job.job_id}.{int(clock.now.timestamp() * 1000):013d}"
    assert [r.message.execution_id for r in sent] == [latest_id]
    # And the schedule goes on from the next slot
    waiting = sorted(e.scheduled_at for e in rows if e.status == ExecutionStatus.SCHEDULED)
    assert waiting == [clock.now, clock.now + timedelta(minutes=1)]


@pytest.mark.parametrize(("policy", "runs", "skipped"), [("all", 4, 0), ("none", 0, 4)])
def test_resume_follows_the_catch_up_policy(ports, clock, policy, runs, skipped):
    job = cron_job(ports, catchUp=policy)
    pause_job(ports, "alice", job.job_id)
    clock.advance(4 * 60 + 30)  # slots 09:01..09:04 missed
    resume_job(ports, "alice", job.job_id)
    sent = {r.message.execution_id for r in drain(ports) if r.message.job_id == job.job_id}
    now_slot = clock.now.replace(second=0)
    missed = {f"{job.job_id}.{int((now_slot - timedelta(minutes=i)).timestamp() * 1000):013d}" for i in range(4)}
    assert len(sent & missed) == runs
    rows = history(ports, job.job_id)
    skip_records = [e for e in rows if e.status == ExecutionStatus.SKIPPED]
    assert sum(e.skipped_count or 1 for e in skip_records) == skipped
    following = [e for e in rows if e.status == ExecutionStatus.SCHEDULED and e.scheduled_at > clock.now]
    assert following and following[0].scheduled_at == now_slot + timedelta(minutes=1)


def test_cancel_ends_waiting_executions_and_fences_out_a_running_one(ports, clock):
    job = cron_job(ports)
    clock.advance(60)
    preload(ports, "p")
    first = next(r for r in drain(ports) if r.message.due_ms == int(clock.now.timestamp() * 1000))
    cases.claim_execution(ports, first.message, "w1")
    cancel_job(ports, "alice", job.job_id)
    rows = history(ports, job.job_id)
    assert {e.status for e in rows} == {ExecutionStatus.CANCELLED}
    with pytest.raises(StaleAttempt):
        cases.complete(ports, first.message.key, 1, succeeded=True)
    assert get_job(ports, "alice", job.job_id).job.status.value == "cancelled"


def test_run_now_runs_at_once_without_disturbing_the_schedule(ports, clock):
    job = cron_job(ports)
    before = get_job(ports, "alice", job.job_id).job.next_run_at
    execution = run_now(ports, "alice", job.job_id)
    [sent] = [r for r in drain(ports) if r.message.execution_id == execution.execution_id]
    claim = cases.claim_execution(ports, sent.message, "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED and claim.execution.kind == "manual"
    assert get_job(ports, "alice", job.job_id).job.next_run_at == before
    pause_job(ports, "alice", job.job_id)
    with pytest.raises(Conflict):
        run_now(ports, "alice", job.job_id)


def test_catch_up_all_runs_every_missed_slot_one_after_another_under_forbid(ports, clock):
    # Given a forbid job paused past three slots, then resumed with catch-up all
    job = cron_job(ports, catchUp="all", overlap="forbid")
    pause_job(ports, "alice", job.job_id)
    clock.advance(3 * 60 + 30)
    resume_job(ports, "alice", job.job_id)
    now_ms = int(clock.now.timestamp() * 1000)
    sent = [r for r in drain(ports) if r.message.job_id == job.job_id and r.message.due_ms <= now_ms]
    assert len(sent) == 3 and {r.message.kind for r in sent} == {"catchup"}
    # When the first claimed run is still going as the next missed slot is claimed
    first, second = sent[0], sent[1]
    assert cases.claim_execution(ports, first.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    # Then the next waits its turn (hidden until later) instead of being skipped for overlap
    assert cases.claim_execution(ports, second.message, "w2").verdict == cases.ClaimVerdict.BUSY
    cases.complete(ports, first.message.key, 1, succeeded=True)
    assert cases.claim_execution(ports, second.message, "w2").verdict == cases.ClaimVerdict.CLAIMED


def test_carrying_out_a_catch_up_plan_twice_creates_no_second_row_for_a_slot(ports, clock):
    # Given a job paused past three slots
    job = cron_job(ports, catchUp="all")
    pause_job(ports, "alice", job.job_id)
    clock.advance(3 * 60 + 30)
    [waiting] = [e for e in history(ports, job.job_id) if e.status == ExecutionStatus.SCHEDULED]
    # When the resume and a concurrent reconcile both dispatch the same waiting slot
    resume_job(ports, "alice", job.job_id)
    from duetime.service.dispatch import dispatch

    clock.advance(5)
    dispatch(ports, [waiting], clock.now)
    # Then every slot has one row
    slots = [e.scheduled_at for e in history(ports, job.job_id)]
    assert len(slots) == len(set(slots)) == 5  # 09:01..09:03 caught up, 09:04 and 09:05 created ahead


def test_an_interval_job_is_anchored_at_creation_and_dispatch_keeps_its_grid(ports, clock):
    # Given a job every 90 minutes, submitted at 09:00 without startAt
    created_at = clock.now
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(
        {"name": "i", "handler": "demo.echo", "schedule": {"every": "90m"}, "catchUp": "latest"}
    ))  # fmt: skip
    # Then its anchor is its creation time, stored with the job, and its first slot one interval later
    stored = ports.store.get_job(job.job_id)
    assert stored.schedule.start_at == created_at
    assert job.next_run_at == created_at + timedelta(minutes=90)
    assert get_job(ports, "alice", job.job_id).next_runs[:3] == [
        created_at + timedelta(minutes=90 * k) for k in (1, 2, 3)
    ]
    # When its first slot is dispatched, the next slot is created one interval after it (not after the clock)
    clock.advance(90 * 60 + 7)
    preload(ports, "p")
    slots = sorted(e.scheduled_at for e in history(ports, job.job_id))
    assert slots == [created_at + timedelta(minutes=90), created_at + timedelta(minutes=180)]
    # And a pause over several slots resumes on the same grid (catch-up latest runs the last missed one)
    pause_job(ports, "alice", job.job_id)
    clock.advance(5 * 3600)
    resume_job(ports, "alice", job.job_id)
    waiting = [e for e in history(ports, job.job_id) if e.status == ExecutionStatus.SCHEDULED]
    assert all(
        (e.scheduled_at - created_at) % timedelta(minutes=90) == timedelta(0) for e in history(ports, job.job_id)
    )
    assert max(e.scheduled_at for e in waiting) > clock.now


def test_excluded_business_days_are_one_skip_record_and_the_chain_goes_on(ports, clock):
    # Given a 09:00 Berlin business-day job submitted Tuesday 2026-12-01 09:00Z, Wednesday to Friday excluded
    body = {"name": "b", "handler": "demo.echo", "schedule": {"cron": "0 9 * * 1-5", "timeZone": "Europe/Berlin"},
            "exclude": ["2026-12-02", "2026-12-03/2026-12-04"]}  # fmt: skip
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    # Then the job shows the runs that will happen: Monday and Tuesday next week (its waiting row is Wednesday)
    monday = clock.now.replace(day=7, hour=8)
    view = get_job(ports, "alice", job.job_id)
    assert (view.job.next_run_at, view.next_runs[:2]) == (monday, [monday, monday + timedelta(days=1)])
    # When Wednesday's slot comes due
    clock.advance(23 * 3600)
    preload(ports, "p")
    # Then Wednesday to Friday are one record, skipped with reason `excluded`, and Monday waits
    rows = history(ports, job.job_id)
    skipped = [e for e in rows if e.status == ExecutionStatus.SKIPPED]
    assert [(e.scheduled_at, e.skip_reason, e.skipped_count) for e in skipped] == [
        (clock.now.replace(hour=8), "excluded", 3)
    ]
    assert [e.scheduled_at for e in rows if e.status == ExecutionStatus.SCHEDULED] == [monday]
    assert drain(ports) == []  # nothing excluded was sent


# --- named calendars -------------------------------------------------------------------------------


def business_days(ports, exclude):
    body = {"name": "b", "handler": "demo.echo", "schedule": {"cron": "0 9 * * 1-5", "timeZone": "Europe/Berlin"},
            "exclude": exclude}  # fmt: skip
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def test_a_named_calendars_dates_are_skipped_as_excluded_with_the_inline_ones(ports, clock):
    # Given alice's calendar holding Thursday and Friday, and a job excluding Wednesday inline and the calendar
    put_calendar(ports, "alice", "holidays-de", ["2026-12-03/2026-12-04"])
    job = business_days(ports, ["2026-12-02", "calendar:holidays-de"])
    monday = clock.now.replace(day=7, hour=8)
    assert get_job(ports, "alice", job.job_id).next_runs[:2] == [monday, monday + timedelta(days=1)]
    # When Wednesday's slot comes due
    clock.advance(23 * 3600)
    preload(ports, "p")
    # Then Wednesday to Friday are one record skipped `excluded`, nothing was sent, and Monday waits
    rows = history(ports, job.job_id)
    assert [(e.scheduled_at, e.skip_reason, e.skipped_count) for e in rows if e.status == ExecutionStatus.SKIPPED] == [
        (clock.now.replace(hour=8), "excluded", 3)
    ]
    assert [e.scheduled_at for e in rows if e.status == ExecutionStatus.SCHEDULED] == [monday]
    assert drain(ports) == []


def test_editing_a_calendar_applies_to_slots_not_yet_dispatched(ports, clock):
    # Given a business-day job on an empty calendar, whose Wednesday slot has run
    put_calendar(ports, "alice", "holidays-de", [])
    job = business_days(ports, ["calendar:holidays-de"])
    clock.advance(23 * 3600)
    preload(ports, "p")
    [wednesday] = drain(ports)
    assert cases.claim_execution(ports, wednesday.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    cases.complete(ports, wednesday.message.key, 1, succeeded=True)
    # When Wednesday and Thursday become holidays, and Thursday's slot comes due
    put_calendar(ports, "alice", "holidays-de", ["2026-12-02/2026-12-03"])
    clock.advance(24 * 3600)
    preload(ports, "p")
    # Then Wednesday's run stays as it was; Thursday is skipped `excluded` and Friday waits
    rows = {e.scheduled_at.day: e for e in history(ports, job.job_id)}
    assert rows[2].status == ExecutionStatus.SUCCEEDED
    assert (rows[3].status, rows[3].skip_reason) == (ExecutionStatus.SKIPPED, "excluded")
    assert rows[4].status == ExecutionStatus.SCHEDULED
    assert drain(ports) == []


def test_a_job_naming_a_calendar_that_does_not_exist_is_refused_naming_exclude(ports):
    put_calendar(ports, "bob", "holidays-de", ["2026-12-25"])  # bob's is not alice's
    with pytest.raises(InvalidInput) as refused:
        business_days(ports, ["calendar:holidays-de"])
    assert refused.value.field == "exclude" and "calendar:holidays-de" in refused.value.message


def test_a_calendar_in_use_is_not_deleted_until_its_jobs_are_cancelled(ports):
    put_calendar(ports, "alice", "holidays-de", ["2026-12-25"])
    job = business_days(ports, ["calendar:holidays-de"])
    with pytest.raises(Conflict) as refused:
        delete_calendar(ports, "alice", "holidays-de")
    assert job.job_id in refused.value.message
    cancel_job(ports, "alice", job.job_id)
    delete_calendar(ports, "alice", "holidays-de")
    assert list_calendars(ports, "alice") == []
    with pytest.raises(NotFound):
        delete_calendar(ports, "alice", "holidays-de")


def test_an_owner_keeps_at_most_the_calendar_limit_and_may_still_replace_one(ports):
    for i in range(MAX_CALENDARS_PER_OWNER):
        put_calendar(ports, "alice", f"c{i}", [])
    with pytest.raises(Conflict):
        put_calendar(ports, "alice", "one-more", [])
    _, created = put_calendar(ports, "alice", "c0", ["2026-12-25"])
    assert created is False and len(list_calendars(ports, "alice")) == MAX_CALENDARS_PER_OWNER
    put_calendar(ports, "bob", "one-more", [])  # the limit is per owner


def test_a_calendar_deleted_under_a_job_excludes_nothing_more(ports, clock):
    # Given a job on a calendar holding Wednesday, the calendar then deleted behind the API's back (a race)
    put_calendar(ports, "alice", "holidays-de", ["2026-12-02"])
    job = business_days(ports, ["calendar:holidays-de"])
    ports.store.delete_calendar("alice", "holidays-de")
    # When Wednesday's slot comes due, it runs
    clock.advance(23 * 3600)
    preload(ports, "p")
    assert [r.message.execution_id for r in drain(ports)] == [f"{job.job_id}.{int(clock.now.timestamp() * 1000)}"]
