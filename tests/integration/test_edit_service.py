"""Editing a job in place through the service on both backends: versions, the waiting run replaced, history kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.domain.errors import Conflict, Forbidden, InvalidInput
from duetime.domain.grants import Grants
from duetime.domain.models import ExecutionStatus, JobSpec, JobStatus, Schedule
from duetime.service import executions as cases
from duetime.service.dispatch import dispatch, preload
from duetime.service.edit import edit_job
from duetime.service.jobs import get_job, pause_job, submit_job
from duetime.service.ports import DueMessage

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


def submit(ports, **overrides):
    body = {"name": "e", "handler": "demo.echo", "schedule": {"cron": "0 * * * *", "timeZone": "UTC"}}
    body.update(overrides)
    job, _ = submit_job(ports, "alice", JobSpec.model_validate(body))
    return job


def waiting(ports, job_id):
    return [e for e in ports.store.open_executions_of_job(job_id) if e.status == ExecutionStatus.SCHEDULED]


def drain(ports):
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += batch
    return out


def test_a_schedule_change_moves_the_next_run_and_keeps_the_history(ports, clock):
    # Given an hourly job that has run once (09:00 -> its 10:00 run waits)
    job = submit(ports, schedule={"cron": "0 * * * *"})
    clock.advance(3600 - clock.now.minute * 60 - clock.now.second)
    preload(ports, "p")
    ran = next(r for r in drain(ports) if r.message.job_id == job.job_id)
    assert cases.claim_execution(ports, ran.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    cases.complete(ports, ran.message.key, 1, True, result={"ok": True})
    before = waiting(ports, job.job_id)
    assert len(before) == 1
    # When it is edited to run at half past, under the version read
    version = get_job(ports, "alice", job.job_id).job.version
    view = edit_job(ports, "alice", job.job_id, version, {"schedule": Schedule(cron="30 * * * *")})
    # Then the waiting run is the new first slot, the only one, and the history is under the same id
    after = waiting(ports, job.job_id)
    assert len(after) == 1 and after[0].scheduled_at.minute == 30
    assert after[0].scheduled_at < before[0].scheduled_at
    assert ports.store.get_execution(ports.store.key_of(before[0])) is None
    assert view.job.next_run_at == after[0].due_at and view.job.version == version + 1
    assert view.job.schedule.cron == "30 * * * *"
    runs = ports.store.executions_of_job(job.job_id, limit=10)
    assert {e.status for e in runs} == {ExecutionStatus.SUCCEEDED, ExecutionStatus.SCHEDULED}
    # And a message queued for the replaced row is dropped at claim
    replaced = DueMessage.for_execution(before[0], ports.store.key_of(before[0]))
    assert cases.claim_execution(ports, replaced, "w2").verdict != cases.ClaimVerdict.CLAIMED
    assert waiting(ports, job.job_id) == after


def test_a_lost_update_gets_409_naming_version_and_changes_nothing(ports, clock):
    job = submit(ports)
    first = edit_job(ports, "alice", job.job_id, job.version, {"payload": {"a": 1}})
    with pytest.raises(Conflict) as lost:
        edit_job(ports, "alice", job.job_id, job.version, {"schedule": Schedule(cron="15 * * * *")})
    assert lost.value.field == "version"
    stored = ports.store.get_job(job.job_id)
    assert stored.payload == {"a": 1} and stored.schedule.cron == "0 * * * *" and stored.version == first.job.version
    assert [e.scheduled_at.minute for e in waiting(ports, job.job_id)] == [0]


def test_the_store_refuses_an_edit_whose_version_moved_meanwhile(ports, clock):
    # Given two editors that both read version 1 and passed the service's check
    job = submit(ports)
    row = waiting(ports, job.job_id)[0]
    edited = job.model_copy(update={"payload": {"b": 2}, "version": job.version + 1})
    ports.store.edit_job(edited, [], None)
    # When the second's transaction lands
    with pytest.raises(Conflict) as lost:
        ports.store.edit_job(edited.model_copy(update={"name": "other"}), [ports.store.key_of(row)], None)
    # Then it wrote nothing: the first's edit stands and the waiting run is still there
    assert lost.value.field == "version"
    assert ports.store.get_job(job.job_id).name == "e"
    assert ports.store.get_execution(ports.store.key_of(row)) == row


def test_a_payload_edit_leaves_the_waiting_run_and_the_quota_count_alone(ports, clock):
    job = submit(ports)
    before = waiting(ports, job.job_id)
    count = ports.store.active_jobs("alice")
    view = edit_job(ports, "alice", job.job_id, job.version, {"payload": {"x": 1}, "tags": {"team": "billing"}})
    assert waiting(ports, job.job_id) == before
    assert view.job.payload == {"x": 1} and view.job.tags == {"team": "billing"}
    assert ports.store.active_jobs("alice") == count


def test_edits_are_checked_as_at_post_naming_the_field(ports, clock):
    job = submit(ports)
    with pytest.raises(InvalidInput) as bad:
        edit_job(ports, "alice", job.job_id, job.version, {"schedule": Schedule(cron="61 * * * *")})
    assert bad.value.field.startswith("schedule")
    with pytest.raises(InvalidInput) as bad:
        edit_job(ports, "alice", job.job_id, job.version, {"timeout_seconds": 0})
    assert bad.value.field == "timeoutSeconds"
    with pytest.raises(InvalidInput) as bad:
        edit_job(ports, "alice", job.job_id, job.version, {"name": None})
    assert bad.value.field == "name"
    ports.grants = Grants.parse([{"owners": ["*"], "handlers": ["demo.*"]}])
    with pytest.raises(Forbidden) as forbidden:
        edit_job(ports, "alice", job.job_id, job.version, {"handler": "lambda:payroll"})
    assert forbidden.value.field == "handler"
    assert ports.store.get_job(job.job_id).version == job.version


def test_a_paused_job_edited_keeps_its_new_run_held(ports, clock):
    job = submit(ports)
    paused = pause_job(ports, "alice", job.job_id).job
    view = edit_job(ports, "alice", job.job_id, paused.version, {"schedule": Schedule(cron="45 * * * *")})
    assert view.job.status == JobStatus.PAUSED
    rows = waiting(ports, job.job_id)
    assert [e.scheduled_at.minute for e in rows] == [45]
    # held as pause holds its waiting run: out of the reconciler's open set
    assert all(
        e.job_id != job.job_id for s in range(ports.settings.shards) for e in ports.store.open_executions(s, 2**62)
    )


def test_a_one_off_that_has_run_cannot_be_rescheduled(ports, clock):
    job = submit(ports, schedule={"at": (clock.now + timedelta(seconds=30)).isoformat()})
    clock.advance(30)
    preload(ports, "p")
    message = next(r for r in drain(ports) if r.message.job_id == job.job_id).message
    cases.claim_execution(ports, message, "w1")
    cases.complete(ports, message.key, 1, True)
    current = ports.store.get_job(job.job_id)
    with pytest.raises(Conflict) as refused:
        edit_job(ports, "alice", job.job_id, current.version, {"schedule": Schedule(at=clock.now + timedelta(hours=1))})
    assert refused.value.field == "status"


def test_a_slot_planned_by_a_preloader_that_read_the_job_before_an_edit_never_runs(ports, clock):
    # Given an hourly job whose 10:00 run waits, and a pre-loader that has read the job as it stands
    job = submit(ports, schedule={"cron": "0 * * * *"})
    clock.advance(3600 - clock.now.minute * 60 - clock.now.second - 30)  # 30 s before the hour
    [old_row] = waiting(ports, job.job_id)
    read_before = ports.store.get_job(job.job_id)
    # When the job is edited to half past meanwhile, and that pre-loader then dispatches what it read
    edit_job(ports, "alice", job.job_id, read_before.version, {"schedule": Schedule(cron="30 * * * *")})
    dispatch(ports, [old_row], clock.now, known_jobs={job.job_id: read_before})
    stale = next(e for e in ports.store.open_executions_of_job(job.job_id) if e.scheduled_at.minute == 0)
    assert stale.scheduled_at == old_row.scheduled_at + timedelta(hours=1)  # the old schedule's next slot
    # Then neither old slot runs: the sent one's row is gone, the stale follower ends skipped when its
    # message is claimed and when a later pre-load finds it
    sent = [r.message for r in drain(ports) if r.message.job_id == job.job_id]
    assert [cases.claim_execution(ports, m, "w").verdict for m in sent] == [cases.ClaimVerdict.DONE] * len(sent)
    stale_message = DueMessage.for_execution(stale, ports.store.key_of(stale))
    claim = cases.claim_execution(ports, stale_message, "w")
    assert claim.verdict == cases.ClaimVerdict.DONE
    assert claim.execution.status == ExecutionStatus.SKIPPED and claim.execution.skip_reason == "schedule edited"
    # And over the next hours only the half-past slots run, one chain
    ran = []
    for _ in range(3):
        clock.advance(3600)
        preload(ports, "p")
        for received in drain(ports):
            if cases.claim_execution(ports, received.message, "w").verdict == cases.ClaimVerdict.CLAIMED:
                cases.complete(ports, received.message.key, 1, True, result={})
                ran.append(received.message)
    assert ran
    runs = [e for e in ports.store.executions_of_job(job.job_id, limit=20) if e.status == ExecutionStatus.SUCCEEDED]
    assert runs and {e.scheduled_at.minute for e in runs} == {30}
    assert len({e.scheduled_at for e in runs}) == len(runs)
    assert len(waiting(ports, job.job_id)) == 1


def test_a_later_preload_ends_a_stale_slot_skipped_without_a_follower(ports, clock):
    # Given a stale row of the old schedule left by a pre-loader's race with an edit
    job = submit(ports, schedule={"cron": "0 * * * *"})
    read_before = ports.store.get_job(job.job_id)
    [old_row] = waiting(ports, job.job_id)
    edit_job(ports, "alice", job.job_id, read_before.version, {"schedule": Schedule(cron="30 * * * *")})
    dispatch(ports, [old_row], clock.now, known_jobs={job.job_id: read_before})
    stale = next(e for e in ports.store.open_executions_of_job(job.job_id) if e.scheduled_at.minute == 0)
    # When a pre-load under the edited job dispatches it
    report = dispatch(ports, [stale], clock.now)
    # Then it ends skipped and plans nothing after it
    assert report.skipped == 1 and report.created == 0 and report.sent == 0
    ended = ports.store.get_execution(ports.store.key_of(stale))
    assert ended.status == ExecutionStatus.SKIPPED and ended.skip_reason == "schedule edited"
    assert [e.scheduled_at.minute for e in waiting(ports, job.job_id)] == [30]
