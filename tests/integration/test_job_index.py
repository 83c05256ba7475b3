"""A plain run of a schedule is written without an entry in its job's index of open runs (`openByJob` on
DynamoDB), and every reader still finds it: the claim's overlap check by its key, cancel and edit among the
job's rows the sweep has not reached, and the sweep, a late claim, a heartbeat or a fast job's claim enter it
(domain/job_index.py). SQLite keeps every open run in its index: the same flows hold there."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from duetime.domain.models import ExecutionStatus, JobSpec
from duetime.service import executions as cases
from duetime.service.audit import audit
from duetime.service.dispatch import preload
from duetime.service.edit import edit_job
from duetime.service.jobs import cancel_job, submit_job
from duetime.service.ports import Received

from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS


def serial_job(ports: Any, cron: str = "* * * * *", **extra: Any) -> str:
    spec = {"name": "serial", "handler": "demo.echo", "schedule": {"cron": cron}, "catchUp": "all", **extra}
    return submit_job(ports, "alice", JobSpec.model_validate(spec))[0].job_id


def in_job_index(ports: Any, received: Received) -> bool:
    """Whether the row of `received` has its job's index entry (always on SQLite: every open row has one)."""
    if not hasattr(ports.store, "client"):
        return True
    key = received.message.key
    item = ports.store.client.get_item(
        TableName=ports.store.executions_table, Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}}, ConsistentRead=True
    )["Item"]
    return "openJob" in item


def next_message(ports: Any, clock: Any, seconds: float) -> Received:
    """The run the pre-loader sends for the next minute, received `seconds` later (at or after its time)."""
    slot = clock.now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    clock.advance(35)
    preload(ports, "p1")
    clock.advance(seconds - 35)
    return received_for(ports, slot)


def received_for(ports: Any, slot: datetime) -> Received:
    """The message of the run in `slot`, among those received now (an earlier one received again is left)."""
    by_slot = {r.message.slot: r for r in ports.queues.receive("default", 10, 0, 30)}
    return by_slot[slot]


def test_a_late_slot_of_a_serial_job_is_skipped_while_the_next_runs_without_an_index_entry(ports, clock, backend):
    # Given an every-minute serial job catching up every slot, whose 09:01 run's message is held back
    serial_job(ports)
    late = next_message(ports, clock, 60)  # 09:01
    # And whose 09:02 run is claimed on time: on DynamoDB it has no index entry (a plain run, on time)
    on_time = next_message(ports, clock, 60)  # 09:02
    running = cases.claim_execution(ports, on_time.message, "w1")
    assert running.execution is not None and running.execution.status == ExecutionStatus.RUNNING
    assert in_job_index(ports, on_time) == (backend == "sqlite")
    # When the 09:01 run's message is claimed 65 s after its time
    clock.advance(5)
    skipped = cases.claim_execution(ports, late.message, "w2")
    # Then its claim found the running 09:02 run by its key and skipped it: the two never run at once
    assert skipped.execution is not None
    assert (skipped.execution.status, skipped.execution.skip_reason) == (ExecutionStatus.SKIPPED, "overlap")
    assert audit(ports).findings == []


def test_a_run_enters_the_index_when_claimed_late_when_it_heartbeats_or_when_the_sweep_passes_it(ports, clock):
    # Given an every-minute job whose 09:01 run is claimed on time: no entry on DynamoDB
    serial_job(ports)
    first = next_message(ports, clock, 60)
    claim = cases.claim_execution(ports, first.message, "w1")
    assert claim.execution is not None
    assert in_job_index(ports, first) == (not hasattr(ports.store, "client"))
    # When it heartbeats: a run that outlives the claim's window enters the index
    clock.advance(10)
    ports.store.heartbeat(first.message.key, 1, clock.now + timedelta(seconds=30), claim.execution.claim_token)
    assert in_job_index(ports, first)
    # And a run claimed 20 s after its time enters it with its claim
    second = next_message(ports, clock, 50)  # 09:02
    clock.advance(20)
    assert cases.claim_execution(ports, second.message, "w2").execution is not None
    assert in_job_index(ports, second)
    # And a run never claimed enters it once the sweep passes its time (`reconcile_after` overdue)
    third = next_message(ports, clock, 40)  # 09:03, its message lost
    assert in_job_index(ports, third) == (not hasattr(ports.store, "client"))
    for _ in range(6):
        clock.advance(60)
        preload(ports, "p1")
    assert in_job_index(ports, third)
    assert all(f.check != "not in the job index" for f in audit(ports).findings)


def test_cancel_ends_a_running_run_and_a_waiting_one_that_have_no_index_entry(ports, clock):
    # Given an every-minute job with a run claimed on time and its next slot planned
    job_id = serial_job(ports)
    running = next_message(ports, clock, 60)
    assert cases.claim_execution(ports, running.message, "w1").execution is not None
    clock.advance(35)
    preload(ports, "p1")  # plans 10:02's run
    # When the job is cancelled
    cancel_job(ports, "alice", job_id)
    # Then both rows were found among the job's rows the sweep has not reached, and ended
    run = ports.store.get_execution(running.message.key)
    assert run is not None and run.status == ExecutionStatus.CANCELLED
    assert ports.store.open_executions_of_job(job_id) == []


def test_an_edit_that_moves_the_schedule_enters_the_running_run_so_the_new_schedule_s_claim_sees_it(ports, clock):
    # Given an every-minute serial job with a run claimed on time (no entry on DynamoDB)
    job_id = serial_job(ports)
    running = next_message(ports, clock, 60)  # 09:01
    claim = cases.claim_execution(ports, running.message, "w1")
    assert claim.execution is not None
    # When its schedule is moved to second 20 of each minute, while that run still runs
    job = ports.store.get_job(job_id)
    assert job is not None
    edit_job(ports, "alice", job_id, job.version, {"schedule": {"cron": "20 * * * * *", "timeZone": "UTC"}})
    # Then the running run is in the index (its slot is no longer one the new schedule has)
    assert in_job_index(ports, running)
    # And the new schedule's first run, claimed at 09:01:20 while the old one still runs, is skipped
    clock.advance(20 - clock.now.second)  # 09:01:20
    preload(ports, "p1")
    skipped = cases.claim_execution(ports, received_for(ports, clock.now).message, "w2")
    assert skipped.execution is not None and skipped.execution.skip_reason == "overlap"


def test_a_job_repeating_within_a_minute_has_its_runs_entered_by_their_claim(ports, clock):
    # Given a serial job every 10 seconds (its window would hold several slots to read by key)
    spec = {"name": "fast", "handler": "demo.echo", "schedule": {"every": "10s"}}
    job = submit_job(ports, "alice", JobSpec.model_validate(spec))[0]
    preload(ports, "p1")  # its runs of the next 30 s, sent at once (the test queues hold none back)
    by_slot = {r.message.slot: r for r in ports.queues.receive("default", 10, 0, 30)}
    first, second = (by_slot[job.created_at + timedelta(seconds=n)] for n in (10, 20))
    # When its first run is claimed on time
    clock.advance(10)
    assert cases.claim_execution(ports, first.message, "w1").execution is not None
    # Then it entered the index with its claim
    assert in_job_index(ports, first)
    # And the next run, claimed while it runs, is skipped
    clock.advance(10)
    skipped = cases.claim_execution(ports, second.message, "w2")
    assert skipped.execution is not None and skipped.execution.skip_reason == "overlap"
    assert all(f.check != "not in the job index" for f in audit(ports).findings)
