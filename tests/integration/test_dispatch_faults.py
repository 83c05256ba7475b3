"""Defects the deterministic simulation found (docs/simulation.md), each pinned by the smallest scene that shows
it, on both store adapters: a pre-loader dying mid-plan, a plan carried out in two batches, a catch-up run beside
a row a retry moved, a resume or a cancel dying half-way, a paused or cancelled job's lost run, and a paused
one-off whose run's end died before completing it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from duetime.domain.models import Execution, ExecutionStatus, Job, JobSpec, JobStatus, format_time
from duetime.domain.spread import spread
from duetime.service.audit import audit
from duetime.service.dispatch import dispatch, new_execution, reconcile, reconcile_after
from duetime.service.executions import claim_execution, complete
from duetime.service.jobs import cancel_job, pause_job, resume_job, submit_job
from duetime.service.outcomes import ClaimVerdict
from duetime.service.ports import DueMessage

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


class Died(BaseException):
    """The call wrote, then its caller died before going on (a BaseException, as a kill is: the pre-loader's
    per-job isolation catches a store error, which leaves the row for the reconciler, but nothing survives a
    death)."""


def fail_after(ports: Any, method: str, times: int = 1) -> None:
    """The next `times` calls of store.`method` write, then raise."""
    real: Callable[..., Any] = getattr(ports.store, method)
    left = [times]

    def call(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if left[0] > 0:
            left[0] -= 1
            raise Died(method)
        return result

    setattr(ports.store, method, call)


def fail_before(ports: Any, method: str) -> None:
    """The next call of store.`method` raises before it reads or writes anything."""
    real: Callable[..., Any] = getattr(ports.store, method)
    left = [1]

    def call(*args: Any, **kwargs: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise Died(method)
        return real(*args, **kwargs)

    setattr(ports.store, method, call)


# An every-minute `latest` job spread over 58 s: two of its slots may fall due in either order.
SPREAD_LATEST = JobSpec.model_validate(
    {"name": "t", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}, "catchUp": "latest", "jitterSeconds": 58}
)


def cron_job(ports: Any, catch_up: str) -> Job:
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"cron": "* * * * *"}, "catchUp": catch_up}
    )
    job, _ = submit_job(ports, "alice", spec)
    return job


def rows(ports: Any, job: Job) -> list[Execution]:
    return sorted(ports.store.iter_executions_of_job(job.job_id), key=lambda e: e.scheduled_at)


def test_a_preloader_dying_after_skipping_a_missed_slot_leaves_the_next_slot(ports, clock) -> None:
    job = cron_job(ports, "none")  # first slot 09:01
    [first] = rows(ports, job)
    clock.advance(5 * 60)  # an outage: 09:01 to 09:04 are missed
    fail_after(ports, "end_waiting")
    with pytest.raises(Died):
        dispatch(ports, [first], clock())
    waiting = [e for e in rows(ports, job) if e.status == ExecutionStatus.SCHEDULED]
    assert [e.scheduled_at for e in waiting] == [first.scheduled_at + timedelta(minutes=5)]  # 09:06 carries it on
    assert not [f for f in audit(ports).findings if f.check == "cron chain broken"]


def test_a_plan_carried_out_in_two_batches_counts_each_slot_once(ports, clock) -> None:
    job = cron_job(ports, "none")
    [first] = rows(ports, job)  # 09:01
    later = new_execution(job, first.scheduled_at + timedelta(minutes=2))  # 09:03, waiting too (a paused chain)
    assert ports.store.put_execution(later)
    clock.advance(10 * 60)  # 09:10: 09:01 to 09:10 are missed
    dispatch(ports, [later], clock())  # one page of the cycle: the reconciler's, say
    dispatch(ports, [first], clock())  # the other: the due window's
    skipped = [e for e in rows(ports, job) if e.status == ExecutionStatus.SKIPPED]
    assert [(e.scheduled_at.minute, e.skipped_count or 1) for e in skipped] == [(1, 2), (3, 8)]


def test_a_catch_up_run_is_not_made_beside_a_row_a_retry_moved(ports, clock) -> None:
    job = cron_job(ports, "all")
    [first] = rows(ports, job)  # 09:01
    slot = first.scheduled_at + timedelta(minutes=1)
    moved = new_execution(job, slot).model_copy(update={"attempt": 1, "due_at": slot + timedelta(minutes=30)})
    assert ports.store.put_execution(moved)  # 09:02's row, moved for its retry to another due partition
    clock.advance(4 * 60)  # 09:04: 09:01 to 09:03 are missed, and `all` runs each
    dispatch(ports, [first], clock())
    assert [e.kind for e in rows(ports, job) if e.scheduled_at == slot] == ["scheduled"]


def test_a_resume_that_dies_after_its_job_write_leaves_no_row_out_of_the_index(ports, clock) -> None:
    job = cron_job(ports, "latest")
    pause_job(ports, "alice", job.job_id)
    fail_after(ports, "update_job_status")
    with pytest.raises(Died):
        resume_job(ports, "alice", job.job_id)
    assert ports.store.get_job(job.job_id).status == JobStatus.ACTIVE
    assert not [f for f in audit(ports).findings if f.check == "not in the open index"]


def test_a_cancel_of_a_paused_job_that_dies_after_its_job_write_leaves_its_rows_to_the_reconciler(ports, clock) -> None:
    job = cron_job(ports, "latest")
    [first] = rows(ports, job)
    pause_job(ports, "alice", job.job_id)  # its waiting row leaves the open index
    fail_after(ports, "update_job_status")
    with pytest.raises(Died):
        cancel_job(ports, "alice", job.job_id)
    clock.advance((reconcile_after(ports) + timedelta(minutes=2)).total_seconds())
    for shard in range(ports.settings.shards):
        reconcile(ports, shard, clock())
    assert [e.status for e in rows(ports, job)] == [ExecutionStatus.CANCELLED]
    assert first.execution_id == rows(ports, job)[0].execution_id


def test_a_cancelled_jobs_lost_run_that_the_cancel_did_not_reach_is_ended_by_the_reconciler(ports, clock) -> None:
    job = cron_job(ports, "latest")
    [first] = rows(ports, job)
    clock.advance(60)
    key = ports.store.key_of(first)
    assert ports.store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed is not None  # w1 dies
    fail_before(ports, "open_executions_of_job")  # the cancel dies after the job's write
    with pytest.raises(Died):
        cancel_job(ports, "alice", job.job_id)
    clock.advance((reconcile_after(ports) + timedelta(minutes=1)).total_seconds())
    for shard in range(ports.settings.shards):
        reconcile(ports, shard, clock())
    [ended] = [e for e in rows(ports, job) if e.execution_id == first.execution_id]
    assert (ended.status, ended.skip_reason) == (ExecutionStatus.CANCELLED, "job cancelled")
    assert not audit(ports).findings


def test_a_paused_jobs_lost_run_waits_for_resume(ports, clock) -> None:
    job = cron_job(ports, "latest")
    [first] = rows(ports, job)
    clock.advance(60)
    key = ports.store.key_of(first)
    claimed = ports.store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    assert claimed is not None  # and its worker dies
    pause_job(ports, "alice", job.job_id)
    clock.advance((reconcile_after(ports) + timedelta(minutes=5)).total_seconds())
    shards = range(ports.settings.shards)
    assert sum(reconcile(ports, shard, clock()).resent for shard in shards) == 0
    assert not [f for f in audit(ports).findings if f.check == "abandoned"]
    resume_job(ports, "alice", job.job_id)
    assert sum(reconcile(ports, shard, clock()).resent for shard in shards) >= 1
    received = ports.queues.receive("default", 10, 0, 30)
    assert first.execution_id in {r.message.execution_id for r in received}
    assert all(isinstance(r.message, DueMessage) for r in received)


def test_a_row_dispatched_again_does_not_make_its_next_slot_beside_a_row_a_retry_moved(ports, clock) -> None:
    """Seed 83 (a seconds schedule): a cycle that died before advancing its cursor dispatches a row again after
    its next slot has run, failed and moved for its retry; the next slot must not be created a second time."""
    start = clock() + timedelta(minutes=10)  # beyond the dispatch horizon: the submit creates the first row only
    schedule = {"every": "5s", "startAt": start.isoformat()}
    spec = JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": schedule})
    job, _ = submit_job(ports, "alice", spec)
    [first] = rows(ports, job)
    slot = first.scheduled_at + timedelta(seconds=5)
    moved = new_execution(job, slot).model_copy(update={"attempt": 1, "due_at": slot + timedelta(minutes=30)})
    assert ports.store.put_execution(moved)  # the next slot's row, moved for its retry to another due partition
    clock.advance((first.scheduled_at + timedelta(seconds=10) - clock()).total_seconds())  # late, not missed
    dispatch(ports, [first], clock())
    assert [e.execution_id for e in rows(ports, job) if e.scheduled_at == slot] == [moved.execution_id]


def test_catch_up_runs_waiting_their_turn_are_not_sent_again_every_cycle(ports, clock) -> None:
    """Seed 4 (a seconds schedule): a backlog of catch-up runs behind the job's running one each keep a
    message (deferred at every BUSY claim); a copy sent beside it every reconciler cycle would be deferred as
    long, and the copies grew by the backlog every cycle. Only the first of the queue is sent again, once no
    run of the job is live."""
    job = cron_job(ports, "all")
    [first] = rows(ports, job)  # 09:01
    waiting = [
        new_execution(job, first.scheduled_at + timedelta(minutes=n)).model_copy(update={"kind": "catchup"})
        for n in (1, 2, 3)
    ]
    for row in waiting:
        assert ports.store.put_execution(row)
    clock.advance(60)
    running = ports.store.claim(ports.store.key_of(first), "w1", clock(), clock() + timedelta(hours=1)).claimed
    assert running is not None  # a long run, its lease kept alive by its heartbeats
    clock.advance((reconcile_after(ports) + timedelta(minutes=5)).total_seconds())
    ports.store.heartbeat(ports.store.key_of(running), running.attempt, clock() + timedelta(minutes=1))
    shards = range(ports.settings.shards)
    assert sum(reconcile(ports, shard, clock()).resent for shard in shards) == 0
    clock.advance(120)  # the run's worker is gone and its lease has ended: the first of the queue goes again
    for shard in shards:
        reconcile(ports, shard, clock())
    received = [r.message.execution_id for r in ports.queues.receive("default", 10, 0, 30)]
    assert waiting[0].execution_id in received
    assert not {w.execution_id for w in waiting[1:]} & set(received)


def accounted(ports: Any, job: Job) -> list[int]:
    """The minutes of every slot the job's rows account for, a skip record for each slot it counts (the job runs
    every minute and excludes nothing), in order: a slot twice is a slot counted twice."""
    return sorted(
        (e.scheduled_at + timedelta(minutes=n)).minute
        for e in rows(ports, job)
        for n in range(e.skipped_count or 1 if e.status == ExecutionStatus.SKIPPED else 1)
    )


def test_two_waiting_rows_of_a_spread_job_planned_apart_count_each_slot_once(ports, clock) -> None:
    """Seed 85 with spread: a cycle that made the next slot and died left two waiting rows of a `latest` job, and
    they were planned in different batches. Each plan judges lateness against its own row's due time (slot plus
    spread), so the earlier row's plan saw an earlier latest slot, 09:09, and ran it, while the later row's plan
    had already counted it skipped beside its run of 09:10. The earlier plan now stops at the later row."""
    spec = SPREAD_LATEST
    # Two slots, not next to each other (the slot right after a missed row was always looked at), the earlier
    # spread further: seconds after 09:10 the later one's plan counts 09:10 as missed (and runs it) while the
    # earlier one's does not yet. A job's spreads follow from its id; one job in a thousand has no such pair.
    for _ in range(20):
        job, _ = submit_job(ports, "alice", spec)
        [first] = rows(ports, job)  # 09:01, spread
        slots = [first.scheduled_at + timedelta(minutes=n) for n in range(8)]
        spreads = {slot: spread(job.job_id, slot, 58) for slot in slots}
        pairs = [
            (a, b)
            for a in slots
            for b in slots
            if b - a >= timedelta(minutes=2) and spreads[a] > spreads[b] + timedelta(seconds=1)
        ]
        if pairs:
            break
    early, late = pairs[0]
    for slot in (early, late):
        if slot != first.scheduled_at:
            assert ports.store.put_execution(new_execution(job, slot))
    if early != first.scheduled_at:
        assert ports.store.end_waiting(ports.store.key_of(first), ExecutionStatus.CANCELLED, clock()) is not None
    waiting = {e.scheduled_at: e for e in rows(ports, job) if e.status == ExecutionStatus.SCHEDULED}
    ten = first.scheduled_at + timedelta(minutes=9)
    now = ten + (spreads[early] + spreads[late]) / 2
    clock.advance((now - clock()).total_seconds())
    dispatch(ports, [waiting[late]], clock())  # one page of the cycle, the reconciler's, say
    dispatch(ports, [waiting[early]], clock())  # the other
    minutes = accounted(ports, job)
    counted = [m for m in minutes if early.minute <= m <= ten.minute]
    assert counted == sorted(set(counted)), minutes
    assert counted == list(range(early.minute, ten.minute + 1))
    runs = [e for e in rows(ports, job) if e.status != ExecutionStatus.SKIPPED and early <= e.scheduled_at <= ten]
    assert [e.scheduled_at for e in runs] == [ten]  # `latest` runs one slot


def test_a_late_plans_next_slot_due_already_is_not_made_beside_a_row_a_retry_moved(ports, clock) -> None:
    """Seed 5380 (spread jobs): a missed slot is judged late against its own spread, so the plan's next slot is
    the first after `now` less that spread; with a smaller spread of its own, that slot may be due already, run,
    failed and moved for its retry. The plan's next slot must not be created a second time beside it."""
    spec = SPREAD_LATEST
    job, _ = submit_job(ports, "alice", spec)
    [first] = rows(ports, job)
    first_spread = spread(job.job_id, first.scheduled_at, job.jitter_seconds)
    # A later slot whose spread is smaller than the first's by more than a second (the ids are the same each run)
    later = [first.scheduled_at + timedelta(minutes=k) for k in range(2, 60)]
    slot = next(s for s in later if spread(job.job_id, s, job.jitter_seconds) < first_spread - timedelta(seconds=1))
    due = slot + spread(job.job_id, slot, job.jitter_seconds)
    moved = new_execution(job, slot).model_copy(update={"attempt": 1, "due_at": due + timedelta(minutes=30)})
    assert ports.store.put_execution(moved)  # that slot's row, claimed on time, failed and moved for its retry
    clock.advance((due + timedelta(milliseconds=500) - clock()).total_seconds())
    dispatch(ports, [first], clock())  # the first slot's row, dispatched only now (an outage)
    assert [e.execution_id for e in rows(ports, job) if e.scheduled_at == slot] == [moved.execution_id]


def test_a_preloader_dying_as_it_skips_a_bounded_jobs_last_slot_leaves_the_job_completed(ports, clock) -> None:
    """Seeds 262 and 489 (--bounded): the plan skipped the missed last slot of a bounded schedule, then the
    pre-loader died before completing the job, which stayed active with nothing to run, for good. The job now
    completes before the missed slots end."""
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"cron": "* * * * *", "maxRuns": 1}, "catchUp": "none"}
    )
    job, _ = submit_job(ports, "alice", spec)
    [first] = rows(ports, job)
    clock.advance(5 * 60)  # an outage: the one slot is missed
    fail_after(ports, "end_waiting")
    with pytest.raises(Died):
        dispatch(ports, [first], clock())
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert not [f for f in audit(ports).findings if f.check == "cron chain broken"]


def test_a_preloader_dying_as_it_skips_an_excluded_slot_leaves_the_next_slot(ports, clock) -> None:
    """Read in the code beside seeds 262 and 489: a slot on an excluded date ended (skipped) before its next slot
    was created, so a pre-loader dying between left the chain with nothing waiting. The next slot now comes first."""
    spec = JobSpec.model_validate(
        {"name": "t", "handler": "demo.echo", "schedule": {"cron": "30 9 * * *"}, "exclude": ["2026-12-01"]}
    )
    job, _ = submit_job(ports, "alice", spec)
    [first] = rows(ports, job)
    assert first.scheduled_at.day == 1  # the first slot is on the excluded date: its row ends as a skip
    clock.advance((first.scheduled_at - clock()).total_seconds())
    fail_after(ports, "end_waiting")
    with pytest.raises(Died):
        dispatch(ports, [first], clock())
    waiting = [e for e in rows(ports, job) if e.status == ExecutionStatus.SCHEDULED and e.scheduled_at.day == 2]
    assert len(waiting) == 1
    assert not [f for f in audit(ports).findings if f.check == "cron chain broken"]


def test_a_paused_one_offs_message_received_while_its_run_runs_stays_until_the_run_s_end_completes_the_job(
    ports, clock
) -> None:
    # Given a one-off whose run was claimed by w1, then its job paused while that run ran (simulation seed 1213)
    at = format_time(clock.now + timedelta(seconds=5))
    spec = JobSpec.model_validate({"name": "o", "handler": "demo.echo", "schedule": {"at": at}})
    job, _ = submit_job(ports, "alice", spec)
    clock.advance(5)
    [received] = ports.queues.receive("default", 10, 0, 30)
    message = received.message
    claim = claim_execution(ports, message, "w1")
    assert claim.verdict == ClaimVerdict.CLAIMED
    pause_job(ports, "alice", job.job_id)
    # When its message comes again to another worker (w1 slow past its visibility) while the run still runs
    clock.advance(40)
    again = claim_execution(ports, message, "w2")
    # Then it is not dropped as a paused job's: a fresh copy waits, as a run waiting its turn does
    assert again.verdict == ClaimVerdict.BUSY and again.deferred is not None
    # And when w1's end writes the run's row but dies before it completes the job it found paused
    fail_after(ports, "get_job")
    with pytest.raises(Died):
        complete(
            ports,
            message.key,
            claim.execution.attempt,
            succeeded=True,
            job=claim.job,
            claim_token=claim.execution.claim_token,
        )
    assert ports.store.get_job(job.job_id).status == JobStatus.PAUSED
    # Then the waiting copy, claimed once its wait is over, completes the job from the ended run
    clock.advance(again.hide_seconds)
    assert claim_execution(ports, again.deferred, "w2").verdict == ClaimVerdict.DONE
    assert ports.store.get_job(job.job_id).status == JobStatus.COMPLETED
    assert not audit(ports).findings
