"""The reconciler sends again what has no live message, within one pre-load cycle of noticing."""

from __future__ import annotations

from datetime import timedelta

from duetime.domain.models import ExecutionStatus, JobSpec, to_ms
from duetime.service import executions as cases
from duetime.service.dispatch import (
    new_execution,
    preload,
    preload_record_key,
    reconcile_after,
    sweep,
    sweep_span_ms,
)
from duetime.service.jobs import submit_job

from tests.conftest import BOTH_BACKENDS

# The use-cases behave the same on every adapter.
pytestmark = BOTH_BACKENDS


def drain(ports):
    out = []
    while batch := ports.queues.receive("default", 10, 0, 30):
        out += batch
    return out


def test_a_waiting_execution_whose_message_was_lost_is_sent_again(ports, clock):
    # Given a job due in 10 s whose message is lost (sent, then dropped)
    job, _ = submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:10Z"}}),
    )
    preload(ports, "p")  # a first cycle: the cursor moves past it (and sends it once more)
    for lost in drain(ports):
        ports.queues.delete("default", lost.receipt)
    # When the reconciler has waited out its grace after the due time
    clock.advance(10 + reconcile_after(ports).total_seconds() + 1)
    report = preload(ports, "p")
    # Then the execution is sent again, and a worker can run it
    assert report.resent == 1
    [again] = drain(ports)
    claim = cases.claim_execution(ports, again.message, "w1")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED
    done = cases.complete(ports, again.message.key, claim.execution.attempt, succeeded=True)
    assert done.status == ExecutionStatus.SUCCEEDED and done.job_id == job.job_id


def test_an_execution_written_but_never_sent_is_found_even_after_the_cursor_passed(ports, clock):
    # Given an execution row written straight to the store (a crash between write and send)
    job, _ = submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T10:00:00Z"}}),
    )
    preload(ports, "p")  # the cursor moves past 09:00:10
    orphan = new_execution(job, clock.now + timedelta(seconds=5), kind="manual")
    assert ports.store.put_execution(orphan)
    clock.advance(5 + reconcile_after(ports).total_seconds() + 1)
    preload(ports, "p")
    assert orphan.execution_id in {r.message.execution_id for r in drain(ports)}


def test_a_running_execution_abandoned_with_no_message_is_sent_again_for_the_next_attempt(ports, clock):
    submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:05Z"}}),
    )
    clock.advance(5)
    [received] = drain(ports)
    assert cases.claim_execution(ports, received.message, "w1").verdict == cases.ClaimVerdict.CLAIMED
    ports.queues.delete("default", received.receipt)  # the in-flight message is lost
    clock.advance(30 + reconcile_after(ports).total_seconds() + 1)
    assert preload(ports, "p").resent == 1
    [again] = drain(ports)
    claim = cases.claim_execution(ports, again.message, "w2")
    assert claim.verdict == cases.ClaimVerdict.CLAIMED and claim.execution.attempt == 2


def test_open_rows_leave_the_open_index_when_they_end(ports, clock):
    submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:05Z"}}),
    )
    clock.advance(5)
    [received] = drain(ports)
    shard = int(received.message.key.pk.rsplit("#", 1)[1])
    # Once its due time is behind the sweep, a row still open is in the index (on DynamoDB it enters it there)
    sweep(ports, shard, to_ms(clock() - timedelta(hours=1)), to_ms(clock()))
    assert len(ports.store.open_executions(shard, 2**42)) == 1
    claim = cases.claim_execution(ports, received.message, "w1")
    cases.complete(ports, received.message.key, claim.execution.attempt, succeeded=True)
    assert ports.store.open_executions(shard, 2**42) == []


def test_each_cycle_sweeps_on_from_where_the_last_stopped_and_an_outage_is_caught_up_over_a_few_cycles(ports, clock):
    # Given a job due in 10 s whose message is lost, and a first cycle that records how far it swept
    job, _ = submit_job(
        ports,
        "alice",
        JobSpec.model_validate({"name": "t", "handler": "demo.echo", "schedule": {"at": "2026-12-01T09:00:10Z"}}),
    )
    preload(ports, "p")
    for lost in drain(ports):
        ports.queues.delete("default", lost.receipt)
    swept = {s: r["sweptMs"] for s, r in sweep_records(ports).items()}
    late = clock.now - reconcile_after(ports)
    assert set(swept.values()) == {to_ms(late)}  # every shard swept to `reconcile_after` ago
    # When the pre-loader is down for an hour, then runs again
    clock.advance(3600)
    most_ms = sweep_span_ms(ports)
    cycles, resent = 0, 0
    while True:
        report = preload(ports, "p")
        cycles, resent = cycles + 1, resent + report.resent
        for received in drain(ports):  # a worker runs what was sent again, and deletes its message: one left
            # would come back after its visibility (30 real seconds, which a loaded machine takes to get here)
            claim = cases.claim_execution(ports, received.message, "w1")
            cases.complete(ports, received.message.key, claim.execution.attempt, succeeded=True)
            ports.queues.delete("default", received.receipt)
        now_swept = {s: r["sweptMs"] for s, r in sweep_records(ports).items()}
        # Then each cycle sweeps on from where the last stopped, at most sweep_span_ms of due time
        assert all(0 < now_swept[s] - swept[s] <= most_ms for s in swept)
        swept = now_swept
        if set(swept.values()) == {to_ms(clock.now - reconcile_after(ports))}:
            break
        clock.advance(ports.settings.preload_interval_seconds)
    # And the lost run, an hour overdue, was found on the way, sent again once and run
    assert cycles > 1 and resent == 1
    [done] = ports.store.executions_of_job(job.job_id)
    assert done.status == ExecutionStatus.SUCCEEDED


def sweep_records(ports):
    keys = [preload_record_key(shard) for shard in range(ports.settings.shards)]
    return {key: record for key, record in ports.store.get_controls(keys).items() if "sweptMs" in record}
