"""Schedules at seconds granularity through the service on both backends (issue 34): a six-field cron and a
1-second interval pre-load every slot of the window, and catch-up, overlap, exclusions and jitter work as
they do for minutes. The hand clock starts at 2026-12-01 09:00:00Z; the pre-load window is 30 s."""

from __future__ import annotations

import itertools
from datetime import timedelta

from duetime.domain.keys import parse_execution_id
from duetime.domain.models import ExecutionStatus, JobSpec, to_ms
from duetime.service import executions as cases
from duetime.service.dispatch import preload
from duetime.service.jobs import get_job, pause_job, resume_job, submit_job

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

EVERY_5S = "*/5 * * * * *"


def job_of(ports, schedule, **overrides):
    body = {"name": "s", "handler": "demo.echo", "schedule": schedule}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def drain(ports):
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += batch
    return out


def history(ports, job_id):
    return sorted(ports.store.executions_of_job(job_id, limit=500), key=lambda e: e.execution_id)


def test_a_seconds_cron_preloads_each_slot_of_the_window_with_its_own_id(ports, clock):
    # Given a job every 5 seconds, submitted at 09:00:00
    start = clock.now
    job = job_of(ports, {"cron": EVERY_5S})
    assert job.next_run_at == start + timedelta(seconds=5)
    assert get_job(ports, "alice", job.job_id).next_runs[:3] == [start + timedelta(seconds=s) for s in (5, 10, 15)]
    # When a pre-load cycle runs a second later
    clock.advance(1)
    preload(ports, "p")
    # Then every slot up to the dispatch horizon (30 s window + 5 s) has a row and a message due at its slot
    rows = history(ports, job.job_id)
    slots = [e.scheduled_at for e in rows]
    assert slots == [start + timedelta(seconds=5 * k) for k in range(1, len(slots) + 1)]
    assert len(slots) >= 6  # 09:00:05 .. 09:00:30 at least
    assert all(parse_execution_id(e.execution_id) == (job.job_id, e.scheduled_at) for e in rows)
    sent = sorted({r.message.due_ms for r in drain(ports) if r.message.job_id == job.job_id})
    assert sent == [to_ms(slot) for slot in slots[: len(sent)]]
    assert sent[-1] >= to_ms(start + timedelta(seconds=30))
    # And the next cycle goes on from the last row (no slot twice, none left out)
    clock.advance(30)
    preload(ports, "p")
    later = [e.scheduled_at for e in history(ports, job.job_id)]
    assert later == [start + timedelta(seconds=5 * k) for k in range(1, len(later) + 1)]
    assert len(later) > len(slots)


def test_a_one_second_interval_keeps_its_grid_to_the_millisecond(ports, clock):
    # Given a job every second anchored at 09:00:00.250
    clock.advance(0.25)
    anchor = clock.now
    job = job_of(ports, {"every": "1s"})
    clock.advance(0.5)
    preload(ports, "p")
    slots = [e.scheduled_at for e in history(ports, job.job_id)]
    # Then its slots are one second apart from the anchor, each its own row
    assert slots == [anchor + timedelta(seconds=k) for k in range(1, len(slots) + 1)]
    assert len(slots) >= 30
    assert {b - a for a, b in itertools.pairwise(slots)} == {timedelta(seconds=1)}


def test_resume_after_two_minutes_catches_up_the_latest_second_slot_and_skips_the_rest(ports, clock):
    # Given a 5-second job paused at once, for two minutes
    start = clock.now
    job = job_of(ports, {"cron": EVERY_5S}, catchUp="latest")
    pause_job(ports, "alice", job.job_id)
    clock.advance(120)
    # When it is resumed
    resume_job(ports, "alice", job.job_id)
    rows = history(ports, job.job_id)
    # Then the latest missed slot (09:02:00) runs as a catch-up run, the 23 before it are skipped (the rows
    # created ahead before the pause one record each, the slots without a row counted on the last of them)
    skipped = [e for e in rows if e.status == ExecutionStatus.SKIPPED]
    assert {e.skip_reason for e in skipped} == {"catch-up latest"}
    assert sum(e.skipped_count or 1 for e in skipped) == 23
    assert max(e.scheduled_at for e in skipped) < start + timedelta(seconds=120)
    caught_up = {r.message.due_ms for r in drain(ports) if r.message.kind == "catchup"}
    assert caught_up == {to_ms(start + timedelta(seconds=120))}
    # And the chain goes on at 09:02:05
    waiting = [e.scheduled_at for e in rows if e.status == ExecutionStatus.SCHEDULED and e.scheduled_at > clock.now]
    assert min(waiting) == start + timedelta(seconds=125)


def test_catch_up_all_runs_each_missed_second_slot(ports, clock):
    start = clock.now
    job = job_of(ports, {"cron": EVERY_5S}, catchUp="all")
    pause_job(ports, "alice", job.job_id)
    clock.advance(90)
    resume_job(ports, "alice", job.job_id)
    # Each missed slot, 09:00:05 .. 09:01:30, is sent to run as a catch-up run
    due = sorted({r.message.due_ms for r in drain(ports) if r.message.kind == "catchup"})
    assert due == [to_ms(start + timedelta(seconds=5 * k)) for k in range(1, 19)]
    assert not [e for e in history(ports, job.job_id) if e.status == ExecutionStatus.SKIPPED]


def test_forbid_skips_a_five_second_slot_while_the_previous_run_goes_on(ports, clock):
    # Given a 5-second forbid job whose 09:00:05 run is still running at 09:00:10
    start = clock.now
    job = job_of(ports, {"cron": EVERY_5S}, overlap="forbid")
    clock.advance(5)
    preload(ports, "p")
    received = {r.message.due_ms: r for r in drain(ports) if r.message.job_id == job.job_id}
    first = received[to_ms(start + timedelta(seconds=5))]
    assert cases.claim_execution(ports, first.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    clock.advance(5)
    # When the 09:00:10 run is claimed
    second = received[to_ms(start + timedelta(seconds=10))]
    claim = cases.claim_execution(ports, second.message, "w2")
    # Then it is recorded skipped for overlap, and the first still runs
    assert claim.verdict == cases.ClaimVerdict.DONE
    assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == "overlap"
    assert ports.store.get_execution(first.message.key).status == ExecutionStatus.RUNNING
    # And once it ends, 09:00:15 runs
    cases.complete(ports, first.message.key, 1, succeeded=True)
    clock.advance(5)
    third = received[to_ms(start + timedelta(seconds=15))]
    assert cases.claim_execution(ports, third.message, "w3").verdict == cases.ClaimVerdict.CLAIMED


def test_an_excluded_date_is_one_skip_record_of_its_second_slots(ports, clock):
    # Given a 5-second job over the evening of 2026-12-01, 2026-12-02 excluded
    clock.advance(14 * 3600 + 59 * 60 + 30)  # 23:59:30
    job = job_of(ports, {"cron": EVERY_5S}, exclude=["2026-12-02"])
    # When the window reaches midnight
    clock.advance(1)
    preload(ports, "p")
    rows = history(ports, job.job_id)
    midnight = clock.now.replace(day=2, hour=0, minute=0, second=0, microsecond=0)
    # Then the evening's slots are sent, the whole excluded day is one record of its 17,280 slots, and the
    # chain goes on at midnight of the 3rd
    assert [e.scheduled_at for e in rows if e.scheduled_at < midnight] == [
        midnight - timedelta(seconds=s) for s in (25, 20, 15, 10, 5)
    ]
    assert [(e.scheduled_at, e.skip_reason, e.skipped_count) for e in rows if e.status == ExecutionStatus.SKIPPED] == [
        (midnight, "excluded", 17_280)
    ]
    assert [e.scheduled_at for e in rows if e.scheduled_at > midnight] == [midnight + timedelta(days=1)]


def test_jitter_spreads_each_five_second_slot_within_its_period(ports, clock):
    job = job_of(ports, {"cron": EVERY_5S}, jitterSeconds=4)
    clock.advance(1)
    preload(ports, "p")
    rows = [e for e in history(ports, job.job_id) if e.due_at <= clock.now + timedelta(seconds=30)]
    assert len(rows) >= 6
    assert all(e.scheduled_at <= e.due_at < e.scheduled_at + timedelta(seconds=4) for e in rows)
    assert len({e.due_at - e.scheduled_at for e in rows}) > 1  # spread, not one offset
    due = {r.message.due_ms for r in drain(ports) if r.message.job_id == job.job_id}
    assert {to_ms(e.due_at) for e in rows} <= due


def test_forbid_still_sees_a_long_run_of_a_one_second_job_among_its_slots_planned_ahead(ports, clock):
    # Given a 1-second forbid job whose first run (09:00:01) is still running 25 s later, its lease kept alive,
    # with the window's slots planned ahead of it
    start = clock.now
    job = job_of(ports, {"every": "1s"}, overlap="forbid")
    clock.advance(1)
    preload(ports, "p")
    received = {r.message.due_ms: r for r in drain(ports) if r.message.job_id == job.job_id}
    first = received[to_ms(start + timedelta(seconds=1))]
    assert cases.claim_execution(ports, first.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    for _ in range(5):
        clock.advance(5)
        cases.heartbeat(ports, first.message.key, 1)
        preload(ports, "p")
        received.update({r.message.due_ms: r for r in drain(ports) if r.message.job_id == job.job_id})
    open_ahead = [e for e in ports.store.open_executions_of_job(job.job_id) if e.due_at > clock.now]
    assert len(open_ahead) > 20  # the pre-loader's window of 1-second slots
    # When the slot due now is claimed
    now_slot = received[to_ms(clock.now)]
    claim = cases.claim_execution(ports, now_slot.message, "w2")
    # Then it is skipped for overlap: the read of the rows due by now still finds the running one
    assert claim.verdict == cases.ClaimVerdict.DONE and claim.execution.skip_reason == "overlap"


def test_an_interval_created_at_a_fraction_of_a_millisecond_keeps_its_slots_on_the_anchor_the_api_answers(ports, clock):
    # Given a 2-second interval created at 09:00:00.2076 (the clock has microseconds; rows and the API keep ms)
    clock.now = clock.now.replace(microsecond=207_600)
    job = job_of(ports, {"every": "2s"})
    # Then its anchor is whole milliseconds, and every slot pre-loaded lies on the grid of that anchor
    assert job.schedule.start_at == clock.now.replace(microsecond=207_000)
    clock.advance(5)
    preload(ports, "p")
    slots = sorted(e.scheduled_at for e in history(ports, job.job_id))
    assert slots and all((to_ms(s) - to_ms(job.schedule.start_at)) % 2000 == 0 for s in slots), slots
