"""One job's error never stops its shard: a slot that cannot be planned pauses its own job, saying why, and
the pre-loader and the reconciler go on with the other jobs of the shard, on both backends (issue 31)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

import pytest
from duetime.domain.events import Event
from duetime.domain.keys import shard_of
from duetime.domain.models import ExecutionStatus, JobSpec, JobStatus
from duetime.service.calendars import put_calendar
from duetime.service.dispatch import preload, reconcile, reconcile_after
from duetime.service.jobs import get_job, preview, resume_job, submit_job

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

# A calendar as the review stored it (PUT /calendars now refuses it): excluded up to the end of year 9999.
TO_THE_END_OF_TIME = "2026-12-01/9999-12-31"


class Recorded:
    """An event sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def publish(self, events: Any) -> None:
        self.events.extend(events)


def every_minute(ports, owner: str, name: str, exclude: list[str] | None = None):
    body = {"name": name, "handler": "demo.echo", "schedule": {"every": "1m"}, "exclude": exclude or []}
    job, _ = submit_job(ports, owner, JobSpec.model_validate(body))
    return job


def neighbours(ports, calendar: str):
    """Mallory's job excluding `calendar` (empty when it is created) and alice's job in the same shard."""
    put_calendar(ports, "mallory", "hol2", [])
    poisoned = every_minute(ports, "mallory", "m", ["calendar:hol2"])
    shards = ports.settings.shards
    for index in range(4 * shards):
        other = every_minute(ports, "alice", f"a{index}")
        if shard_of(other.job_id, shards) == shard_of(poisoned.job_id, shards):
            break
    else:
        raise AssertionError("no job of alice's landed in mallory's shard")
    put_calendar(ports, "mallory", "hol2", [calendar])
    return poisoned, other


def sent(ports) -> list[str]:
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += [r.message.job_id for r in batch]
    return out


def waiting(ports, job_id: str):
    return [e for e in ports.store.open_executions_of_job(job_id) if e.status == ExecutionStatus.SCHEDULED]


@pytest.mark.parametrize(
    ("calendar", "why"),
    [
        (TO_THE_END_OF_TIME, "up to 2200-12-31 is excluded"),  # planning used to raise OverflowError
        ("2026-02-30", "ValueError: '2026-02-30' is not a calendar date"),  # a stored date that cannot parse
    ],
)
def test_a_job_whose_slot_cannot_be_planned_is_paused_and_its_shard_neighbour_is_sent_in_the_same_pass(
    ports, clock, calendar, why
):
    # Given mallory's every-minute job whose calendar became unplannable, and alice's job in the same shard
    events = Recorded()
    ports = replace(ports, events=events)
    poisoned, other = neighbours(ports, calendar)
    sent(ports)  # the first slots, sent at submit
    # When the next slots come due and one pre-load pass runs
    clock.advance(60)
    report = preload(ports, "p")
    # Then the shard's pass ended (no error), alice's run was sent in it, and the cursor moved on
    assert (report.errors, report.paused) == (0, 1)
    assert other.job_id in sent(ports)
    # And mallory's job is paused, its note saying why, its next slot held waiting (not lost) for resume
    paused = ports.store.get_job(poisoned.job_id)
    assert paused.status == JobStatus.PAUSED and why in (paused.note or "")
    assert paused.note.startswith("paused by dispatch")
    assert len(waiting(ports, poisoned.job_id)) == 1
    told = [e.detail_type for e in events.events if e.detail.get("jobId") == poisoned.job_id]
    assert told[-1] == "Job Auto-Paused"
    # And the next pass costs nothing for it: nothing of mallory's is sent, alice's next run is
    clock.advance(60)
    assert preload(ports, "p").paused == 0
    later = sent(ports)
    assert other.job_id in later and poisoned.job_id not in later


def test_the_reconciler_pauses_an_unplannable_overdue_job_and_resends_its_neighbour(ports, clock):
    # Given both jobs' next slots overdue with no message (a lost send) and mallory's calendar poisoned
    poisoned, other = neighbours(ports, TO_THE_END_OF_TIME)
    sent(ports)
    clock.advance(reconcile_after(ports).total_seconds() + 60)
    shard = shard_of(other.job_id, ports.settings.shards)
    # When the reconciler pages through the shard's open rows
    report = reconcile(ports, shard, clock.now)
    # Then alice's is sent again and mallory's job is paused instead of failing the page
    assert report.paused == 1 and other.job_id in sent(ports)
    assert ports.store.get_job(poisoned.job_id).status == JobStatus.PAUSED


def test_a_job_excluded_up_to_the_horizon_reads_with_no_next_run_and_resumes_once_its_calendar_is_fixed(ports, clock):
    # Given mallory's job whose calendar excludes every date from now on
    poisoned, _ = neighbours(ports, TO_THE_END_OF_TIME)
    sent(ports)
    # Then reading it answers (it used to raise OverflowError: a 500), showing no run to come
    assert get_job(ports, "mallory", poisoned.job_id).next_runs == []
    # And a preview with that calendar, or with the inline range up to the horizon, shows none
    job = ports.store.get_job(poisoned.job_id)
    calendars = ports.store.get_calendars("mallory")
    assert preview(job.schedule, clock.now, 5, ["calendar:hol2"], calendars) == []
    assert preview(job.schedule, clock.now, 5, ["2026-12-01/2200-12-31"]) == []
    # When dispatch pauses it, its calendar is fixed and it is resumed
    clock.advance(60)
    preload(ports, "p")
    put_calendar(ports, "mallory", "hol2", ["2026-12-01"])
    clock.advance(86400 - 60)
    resume_job(ports, "mallory", poisoned.job_id)
    # Then its held slot is planned again: skipped as excluded, and its chain goes on from 2 December
    view = get_job(ports, "mallory", poisoned.job_id)
    assert view.job.status == JobStatus.ACTIVE
    assert view.next_runs and all(run.date() >= date(2026, 12, 2) for run in view.next_runs)


def test_a_store_error_on_one_jobs_slot_leaves_it_waiting_for_the_reconciler_not_paused(ports, clock, monkeypatch):
    # Given mallory's job naming a calendar, alice's in the same shard, and the calendar read failing
    poisoned, other = neighbours(ports, "2026-12-25")
    sent(ports)

    def unreachable(owner: str) -> Any:
        raise ConnectionError("the control table is unreachable")

    monkeypatch.setattr(ports.store, "get_calendars", unreachable)
    # When the next slots come due
    clock.advance(60)
    report = preload(ports, "p")
    # Then the pass went on without it (alice's run sent), and mallory's job is not paused for a passing fault:
    # its row stays waiting where the reconciler finds it
    assert (report.errors, report.paused, report.unplanned) == (0, 0, 1)
    assert other.job_id in sent(ports)
    assert ports.store.get_job(poisoned.job_id).status == JobStatus.ACTIVE
    assert len(waiting(ports, poisoned.job_id)) == 1
