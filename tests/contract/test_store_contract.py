"""The store ports' contract (jobs, executions, control records), written once and run on every adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from duetime.definitions import MAX_ERROR_BYTES
from duetime.domain.errors import Conflict, InvalidInput, StaleAttempt
from duetime.domain.exclusions import Calendar
from duetime.domain.keys import ExecutionKey, due_partition, open_index_key, shard_of
from duetime.domain.models import ExecutionStatus, JobStatus, to_ms
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job, swept

# --- jobs ------------------------------------------------------------------------------------------


def test_a_job_is_created_with_its_first_execution_and_read_back(ports, clock):
    store = ports.store
    job = make_job(clock)
    first = new_execution(job, clock() + timedelta(minutes=5))
    store.create_job(job, first)
    assert store.get_job(job.job_id) == job
    assert store.get_execution(store.key_of(first)) == first
    assert store.get_job("j_0000000000000404") is None


def test_creating_a_job_twice_is_a_conflict_and_writes_nothing(ports, clock):
    store = ports.store
    job = make_job(clock)
    store.create_job(job, new_execution(job, clock() + timedelta(minutes=5)))
    again = job.model_copy(update={"name": "second"})
    other_slot = new_execution(again, clock() + timedelta(minutes=9))
    with pytest.raises(Conflict):
        store.create_job(again, other_slot)
    assert store.get_job(job.job_id).name == "contract"
    assert store.get_execution(store.key_of(other_slot)) is None


def test_an_idempotency_key_is_written_with_the_job_and_a_second_use_writes_nothing(ports, clock):
    store = ports.store
    record = {"key": "idem#alice#k1", "bodyHash": "h1", "expiresAt": int((clock() + timedelta(hours=24)).timestamp())}
    job = make_job(clock)
    store.create_job(job, new_execution(job, clock() + timedelta(minutes=5)), record)
    assert store.get_control("idem#alice#k1") == {**record, "jobId": job.job_id}
    # When a concurrent duplicate (another job id) uses the same key
    twin = make_job(clock, job_id="j_0000000000000002")
    twin_first = new_execution(twin, clock() + timedelta(minutes=5))
    with pytest.raises(Conflict):
        store.create_job(twin, twin_first, record)
    # Then the transaction wrote none of it
    assert store.get_job(twin.job_id) is None
    assert store.get_execution(store.key_of(twin_first)) is None
    assert store.get_control("idem#alice#k1")["jobId"] == job.job_id


def test_many_jobs_are_read_by_id_and_missing_ones_are_left_out(ports, clock):
    store = ports.store
    jobs = [make_job(clock, job_id=f"j_{i:016x}") for i in range(1, 4)]
    for job in jobs:
        store.create_job(job, None)
    found = store.get_jobs([jobs[0].job_id, jobs[2].job_id, jobs[0].job_id, "j_00000000000000ff"])
    assert found == {jobs[0].job_id: jobs[0], jobs[2].job_id: jobs[2]}
    assert sorted(j.job_id for j in store.scan_jobs()) == [j.job_id for j in jobs]


def test_an_owners_jobs_are_listed_newest_first_in_pages_with_an_opaque_cursor(ports, clock):
    store = ports.store
    mine = []
    for i in range(5):
        clock.advance(1)
        mine.append(make_job(clock, job_id=f"j_{i + 1:016x}"))
        store.create_job(mine[-1], None)
        store.create_job(make_job(clock, job_id=f"j_{i + 100:016x}", owner="bob"), None)
    seen, cursor, pages = [], None, 0
    while True:
        page = store.list_jobs("alice", 2, cursor)
        assert len(page.items) <= 2
        seen += [j.job_id for j in page.items]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        assert isinstance(cursor, str)
    assert seen == [j.job_id for j in reversed(mine)]
    assert pages >= 3


def test_a_cursor_is_refused_by_another_owner_and_a_made_up_one_by_anyone(ports, clock):
    store = ports.store
    for i in range(3):
        clock.advance(1)
        store.create_job(make_job(clock, job_id=f"j_{i + 1:016x}", owner="bob"), None)
    page = store.list_jobs("bob", 1, None)
    assert page.cursor
    with pytest.raises(InvalidInput) as refused:
        store.list_jobs("alice", 1, page.cursor)
    assert refused.value.field == "cursor"
    for garbage in ["%%%", "bm90LWpzb24", "e30"]:
        with pytest.raises(InvalidInput):
            store.list_jobs("bob", 1, garbage)


def test_a_job_status_changes_only_from_the_version_it_was_read_at(ports, clock):
    store = ports.store
    job = make_job(clock)
    store.create_job(job, None)
    paused = store.update_job_status(job, JobStatus.PAUSED, clock.advance(5))
    assert (paused.status, paused.version) == (JobStatus.PAUSED, 2)
    assert store.get_job(job.job_id).status == JobStatus.PAUSED
    with pytest.raises(Conflict):
        store.update_job_status(job, JobStatus.CANCELLED, clock())  # read at version 1
    assert store.get_job(job.job_id).version == 2


# --- executions: creation and reads ------------------------------------------------------------------


def test_an_execution_lives_in_the_partition_of_its_due_hour_and_shard_and_its_slot_is_created_once(ports, clock):
    store = ports.store
    job = make_job(clock, schedule={"cron": "* * * * *"})
    store.create_job(job, None)  # a plain run's row is found by its job's schedule (domain/history.py)
    execution = new_execution(job, clock() + timedelta(minutes=90))
    key = store.key_of(execution)
    assert key == ExecutionKey(
        pk=due_partition(execution.due_at, shard_of(job.job_id, ports.settings.shards)),
        sk=f"{to_ms(execution.due_at):013d}#{execution.execution_id}",
    )
    assert store.put_execution(execution) is True
    assert store.put_execution(execution.model_copy(update={"kind": "catchup"})) is False
    assert store.get_execution(key).kind == "scheduled"
    later = new_execution(job, clock() + timedelta(minutes=91))
    assert store.put_executions([execution, later]) == [later]
    assert store.find_execution(job.job_id, later.execution_id) == later
    assert store.find_execution(job.job_id, f"{job.job_id}.0000000000000") is None


def test_due_executions_are_queried_by_partition_and_window_oldest_first_and_only_while_waiting(ports, clock):
    store = ports.store
    job = make_job(clock)
    base = clock().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    rows = [new_execution(job, base + timedelta(seconds=s)) for s in (30, 10, 20, 40)]
    store.put_executions(rows)
    partition = store.key_of(rows[0]).pk
    key = store.key_of(rows[1])  # due at +10 s
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    due = store.query_due(partition, to_ms(base + timedelta(seconds=10)), to_ms(base + timedelta(seconds=30)))
    assert [e.due_at for e in due] == [base + timedelta(seconds=20), base + timedelta(seconds=30)]
    assert store.query_due(partition, 0, to_ms(base + timedelta(seconds=10))) == []  # the one at +10 s runs
    assert store.query_due("2000010100#000", 0, 2**42) == []


def test_a_jobs_open_executions_due_by_an_instant_leave_out_the_slots_planned_after_it(ports, clock):
    """A job repeating every second has its window's slots open ahead; the overlap check reads only those due
    by now (plus a margin): the bound is inclusive to the millisecond, and the order stays earliest first."""
    store = ports.store
    job = make_job(clock, schedule={"every": "1s", "startAt": clock().replace(microsecond=0)})
    store.create_job(job, None)
    base = clock().replace(microsecond=0)
    rows = [new_execution(job, base + timedelta(seconds=s)) for s in range(10)]
    store.put_executions(rows)
    store.claim(store.key_of(rows[2]), "w1", clock(), clock() + timedelta(seconds=30))  # running, due at +2 s
    other = make_job(clock, job_id="j_0000000000000002")
    store.put_execution(new_execution(other, base))

    def ids(found):
        return [e.execution_id for e in found]

    assert ids(store.open_executions_of_job(job.job_id)) == ids(rows)
    assert ids(store.open_executions_of_job(job.job_id, due_by=base + timedelta(seconds=3))) == ids(rows[:4])
    within = base + timedelta(seconds=3, microseconds=999)  # a millisecond's fraction: still +3 s
    assert ids(store.open_executions_of_job(job.job_id, due_by=within)) == ids(rows[:4])
    before = base + timedelta(seconds=2, milliseconds=999)
    assert ids(store.open_executions_of_job(job.job_id, due_by=before)) == ids(rows[:3])
    assert store.open_executions_of_job(job.job_id, due_by=base - timedelta(milliseconds=1)) == []


def test_a_jobs_history_is_paged_newest_first_and_iterated_oldest_first(ports, clock):
    store = ports.store
    job = make_job(clock, schedule={"cron": "* * * * *"})
    store.create_job(job, None)
    rows = [new_execution(job, clock() + timedelta(minutes=m)) for m in range(7)]
    store.put_executions(rows)
    other = make_job(clock, job_id="j_0000000000000002")
    store.put_execution(new_execution(other, clock()))
    clock.advance(7 * 60)  # the rows are history (a row is planned ahead only within the pre-load window)
    seen, cursor = [], None
    while True:
        page = store.list_executions(job.job_id, 3, cursor)
        assert len(page.items) <= 3
        seen += [e.execution_id for e in page.items]
        if page.cursor is None:
            break
        cursor = page.cursor
    ids = [e.execution_id for e in rows]
    assert seen == ids[::-1]
    assert [e.execution_id for e in store.list_executions(job.job_id, 10, None, newest_first=False).items] == ids
    assert [e.execution_id for e in store.iter_executions_of_job(job.job_id)] == ids
    assert [e.execution_id for e in store.executions_of_job(job.job_id, limit=2)] == ids[:-3:-1]


def test_a_history_cursor_is_bound_to_its_job(ports, clock):
    store = ports.store
    job, other = make_job(clock, schedule={"cron": "* * * * *"}), make_job(clock, job_id="j_0000000000000002")
    store.create_job(job, None)
    store.put_executions([new_execution(job, clock() + timedelta(minutes=m)) for m in range(3)])
    page = store.list_executions(job.job_id, 1, None)
    assert page.cursor
    with pytest.raises(InvalidInput) as refused:
        store.list_executions(other.job_id, 1, page.cursor)
    assert refused.value.field == "cursor"


# --- executions: claim, lease, fencing ----------------------------------------------------------------


def waiting(ports, clock, minutes: float = 0):
    job = make_job(clock)
    execution = new_execution(job, clock() + timedelta(minutes=minutes))
    ports.store.put_execution(execution)
    return ports.store.key_of(execution)


def test_a_claim_takes_a_waiting_row_once_and_records_the_attempt(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    now = clock()
    outcome = store.claim(key, "w1", now, now + timedelta(seconds=30))
    claimed = outcome.claimed
    assert claimed is not None and outcome.current is None
    assert (claimed.status, claimed.attempt, claimed.worker_id) == (ExecutionStatus.RUNNING, 1, "w1")
    assert claimed.lease_until == now + timedelta(seconds=30) and claimed.started_at == now
    assert [(a.attempt, a.worker_id, a.started_at) for a in claimed.attempts] == [(1, "w1", now)]
    assert store.get_execution(key) == claimed
    # A second worker finds the row held, and sees it as it stands
    refused = store.claim(key, "w2", now, now + timedelta(seconds=30))
    assert refused.claimed is None and refused.current == claimed


def test_a_running_row_is_taken_over_only_after_its_lease_and_while_attempts_are_left(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    first = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    assert store.claim(key, "w2", clock.advance(29.999), clock() + timedelta(seconds=30)).claimed is None
    taken = store.claim(key, "w2", clock.advance(0.001), clock() + timedelta(seconds=30), max_attempts=2).claimed
    assert taken is not None and taken.attempt == 2 and taken.worker_id == "w2"
    assert [a.worker_id for a in taken.attempts] == ["w1", "w2"] and first.attempt == 1
    last = store.claim(key, "w3", clock.advance(60), clock() + timedelta(seconds=30), max_attempts=2)
    assert last.claimed is None and last.current.attempt == 2  # no attempt left


def test_a_claim_of_a_missing_or_ended_row_claims_nothing(ports, clock):
    store = ports.store
    missing = ExecutionKey(pk="2026120109#000", sk="1796115600000#j_0000000000000404.1796115600000")
    assert store.claim(missing, "w1", clock(), clock() + timedelta(seconds=30)).claimed is None
    key = waiting(ports, clock)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock())
    outcome = store.claim(key, "w2", clock.advance(60), clock() + timedelta(seconds=30))
    assert outcome.claimed is None and outcome.current.status == ExecutionStatus.SUCCEEDED


def test_every_write_of_an_attempt_naming_a_wrong_claim_token_is_refused_and_changes_nothing(ports, clock):
    # Given a row claimed by w1: the claim mints a token, stored on the row and handed to the claimer
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    token = claimed.claim_token
    assert token is not None and len(token) >= 16 and store.get_execution(key).claim_token == token
    # When each write names the right attempt but a wrong token, the store's own conditional write refuses it
    later = clock() + timedelta(seconds=50)
    moved = claimed.model_copy(
        update={"due_at": clock() + timedelta(hours=2), "status": ExecutionStatus.SCHEDULED, "claim_token": None}
    )
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    writes = [
        lambda: store.heartbeat(key, 1, later, forged),
        lambda: store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock(), result="forged", claim_token=forged),
        lambda: store.finish(key, 1, ExecutionStatus.FAILED, clock(), error="forged", claim_token=forged),
        lambda: store.end_claimed(key, 1, ExecutionStatus.CANCELLED, clock(), "forged", forged),
        lambda: store.move_for_retry(key, 1, moved, forged),
    ]
    for write in writes:
        with pytest.raises(StaleAttempt):
            write()
    assert store.release(key, 1, clock(), forged) is False
    # Then nothing changed
    assert store.get_execution(key) == claimed
    assert store.get_execution(store.key_of(moved)) is None
    # And the holder's writes, naming the token, go through
    assert store.heartbeat(key, 1, later, token).lease_until == later
    done = store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock(), result={"n": 1}, claim_token=token)
    assert (done.status, done.result) == (ExecutionStatus.SUCCEEDED, {"n": 1})


def test_each_claim_mints_a_new_token_and_the_last_attempts_token_holds_no_more(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    first = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    second = store.claim(key, "w2", clock.advance(31), clock() + timedelta(seconds=30)).claimed
    assert second.attempt == 2 and second.claim_token not in (None, first.claim_token)
    with pytest.raises(StaleAttempt):
        store.heartbeat(key, 2, clock() + timedelta(seconds=30), first.claim_token)
    moved = second.model_copy(
        update={"due_at": clock() + timedelta(hours=2), "status": ExecutionStatus.SCHEDULED, "claim_token": None}
    )
    store.move_for_retry(key, 2, moved, second.claim_token)
    again = store.get_execution(store.key_of(moved))
    assert again.status == ExecutionStatus.SCHEDULED and again.claim_token is None


RESULTS = [
    {"nested": {"list": [1, 2.5, -3e-7, None, True], "text": 'é ✓ \\ " \n'}, "big": 2**53 + 1},
    ["a", {"b": []}, 0.1],
    "plain text",
    12345678901234567890,
    False,
]


@pytest.mark.parametrize("result", RESULTS)
def test_a_result_of_any_json_shape_is_stored_and_read_back_exactly(ports, clock, result):
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    done = store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock(), result=result, claim_token=claimed.claim_token)
    assert done.result == result and type(done.result) is type(result)
    assert store.get_execution(key) == done


def test_a_failed_second_attempt_records_its_error_on_that_attempt_alone(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    second = store.claim(key, "w2", clock.advance(31), clock() + timedelta(seconds=30)).claimed
    failed = store.finish(key, 2, ExecutionStatus.FAILED, clock.advance(1), error="boom", outcome="unknown")
    assert (failed.status, failed.error, failed.lease_until) == (ExecutionStatus.FAILED, "boom", None)
    assert failed.attempt == 2
    first, last = failed.attempts
    assert (first.worker_id, first.finished_at, first.outcome, first.error) == ("w1", None, None, None)
    assert (last.worker_id, last.started_at, last.finished_at, last.outcome, last.error) == (
        "w2",
        second.started_at,
        clock(),
        "unknown",
        "boom",
    )
    assert store.get_execution(key) == failed


def test_heartbeats_and_release_are_fenced_by_the_attempt_number(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    later = clock() + timedelta(seconds=50)
    assert store.heartbeat(key, 1, later).lease_until == later
    with pytest.raises(StaleAttempt):
        store.heartbeat(key, 2, later)
    # w2 takes over after the lease: w1's attempt is fenced out
    store.claim(key, "w2", clock.advance(51), clock() + timedelta(seconds=30))
    with pytest.raises(StaleAttempt):
        store.heartbeat(key, 1, clock() + timedelta(seconds=90))
    assert store.release(key, 1, clock()) is False
    assert store.release(key, 2, clock()) is True
    assert store.get_execution(key).lease_until == clock()
    assert store.claim(key, "w3", clock(), clock() + timedelta(seconds=30)).claimed.attempt == 3  # at once


def test_finish_is_fenced_and_records_the_outcome_once(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    with pytest.raises(StaleAttempt):
        store.finish(key, 2, ExecutionStatus.SUCCEEDED, clock())
    done = store.finish(key, 1, ExecutionStatus.SUCCEEDED, clock.advance(2), result={"n": 1})
    assert (done.status, done.result, done.finished_at, done.lease_until) == (
        ExecutionStatus.SUCCEEDED,
        {"n": 1},
        clock(),
        None,
    )
    assert (done.attempts[0].outcome, done.attempts[0].finished_at) == ("succeeded", clock())
    assert store.get_execution(key) == done
    with pytest.raises(StaleAttempt):
        store.finish(key, 1, ExecutionStatus.FAILED, clock())


def test_a_failure_keeps_its_error_bounded_and_stays_open_until_the_owner_is_told(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    shard = int(key.pk.rsplit("#", 1)[1])
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    failed = store.finish(key, 1, ExecutionStatus.FAILED, clock(), error="x" * (MAX_ERROR_BYTES + 10))
    assert failed.error is not None and len(failed.error.encode()) <= MAX_ERROR_BYTES
    assert failed.error.startswith("xxx") and failed.attempts[0].error == failed.error
    swept(ports, shard, clock())
    assert [e.execution_id for e in store.open_executions(shard, 2**42)] == [failed.execution_id]
    store.mark_notified(key, clock())
    assert store.open_executions(shard, 2**42) == []
    assert store.get_execution(key).status == ExecutionStatus.FAILED


def test_a_retry_moves_the_row_to_its_new_due_partition_fenced_by_the_attempt(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    claimed = store.claim(key, "w1", clock(), clock() + timedelta(seconds=30)).claimed
    moved = claimed.model_copy(
        update={"due_at": clock() + timedelta(hours=2), "status": ExecutionStatus.SCHEDULED, "lease_until": None}
    )
    with pytest.raises(StaleAttempt):
        store.move_for_retry(key, 2, moved)
    assert store.get_execution(key) == claimed  # nothing moved
    store.move_for_retry(key, 1, moved)
    new_key = store.key_of(moved)
    assert new_key.pk != key.pk
    assert store.get_execution(key) is None
    again = store.get_execution(new_key)
    assert (again.status, again.attempt, again.due_at) == (ExecutionStatus.SCHEDULED, 1, moved.due_at)
    with pytest.raises(StaleAttempt):
        store.move_for_retry(key, 1, moved)  # the old row is gone
    assert store.claim(new_key, "w2", clock(), clock() + timedelta(seconds=30)).claimed.attempt == 2


def test_a_waiting_row_is_ended_only_while_it_waits(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    skipped = store.end_waiting(key, ExecutionStatus.SKIPPED, clock(), "overlap", skipped_count=3)
    assert (skipped.status, skipped.skip_reason, skipped.skipped_count, skipped.finished_at) == (
        ExecutionStatus.SKIPPED,
        "overlap",
        3,
        clock(),
    )
    assert store.end_waiting(key, ExecutionStatus.CANCELLED, clock()) is None
    running = waiting(ports, clock, minutes=1)
    store.claim(running, "w1", clock(), clock() + timedelta(seconds=30))
    assert store.end_waiting(running, ExecutionStatus.CANCELLED, clock()) is None
    missing = ExecutionKey(pk="2026120109#000", sk="1796115600000#j_0000000000000404.1796115600000")
    assert store.end_waiting(missing, ExecutionStatus.CANCELLED, clock()) is None


def test_a_claimed_attempt_is_ended_unrun_only_by_its_holder(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    with pytest.raises(StaleAttempt):
        store.end_claimed(key, 2, ExecutionStatus.SKIPPED, clock(), "overlap")
    ended = store.end_claimed(key, 1, ExecutionStatus.CANCELLED, clock(), "replaced")
    assert (ended.status, ended.skip_reason, ended.lease_until) == (ExecutionStatus.CANCELLED, "replaced", None)
    with pytest.raises(StaleAttempt):
        store.heartbeat(key, 1, clock() + timedelta(seconds=30))


def test_the_open_set_holds_unfinished_rows_of_a_shard_in_due_order_up_to_a_bound(ports, clock):
    store = ports.store
    job = make_job(clock)
    shard = shard_of(job.job_id, ports.settings.shards)
    rows = [new_execution(job, clock() + timedelta(minutes=m)) for m in (3, 1, 2, 4)]
    store.put_executions(rows)
    ended = store.key_of(rows[3])
    store.end_waiting(ended, ExecutionStatus.CANCELLED, clock())
    running = store.key_of(rows[0])
    store.claim(running, "w1", clock(), clock() + timedelta(seconds=30))
    swept(ports, shard, clock() + timedelta(minutes=4))
    bound = to_ms(clock() + timedelta(minutes=3))
    assert [e.due_at for e in store.open_executions(shard, bound)] == [
        clock() + timedelta(minutes=m) for m in (1, 2, 3)
    ]
    assert store.open_executions((shard + 1) % ports.settings.shards, 2**42) == []
    audited = {s.execution.execution_id: s for s in store.scan_open_executions()}
    assert set(audited) == {rows[0].execution_id, rows[1].execution_id, rows[2].execution_id}
    assert audited[rows[0].execution_id].key == running
    assert audited[rows[0].execution_id].open_shard == open_index_key(running)


def test_a_sweep_puts_every_row_still_open_into_the_open_set_and_none_that_ended(ports, clock):
    store = ports.store
    job = make_job(clock)
    shard = shard_of(job.job_id, ports.settings.shards)
    rows = [new_execution(job, clock() + timedelta(minutes=m)) for m in range(5)]
    store.put_executions(rows)
    keys = [store.key_of(row) for row in rows]
    for key in keys[1:4]:
        store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    store.finish(keys[2], 1, ExecutionStatus.SUCCEEDED, clock())
    store.finish(keys[3], 1, ExecutionStatus.FAILED, clock(), error="boom")  # its owner not told yet
    swept(ports, shard, clock() + timedelta(minutes=4))
    open_now = [e.execution_id for e in store.open_executions(shard, 2**42)]
    # waiting, running, failed untold, waiting: in due order; the one that succeeded is not
    assert open_now == [rows[m].execution_id for m in (0, 1, 3, 4)]
    assert swept(ports, shard, clock() + timedelta(minutes=4)) == 0  # a second sweep finds nothing to add
    store.mark_notified(keys[3], clock())
    store.end_waiting(keys[0], ExecutionStatus.CANCELLED, clock())
    store.finish(keys[1], 1, ExecutionStatus.SUCCEEDED, clock())
    assert [e.execution_id for e in store.open_executions(shard, 2**42)] == [rows[4].execution_id]


def test_on_dynamodb_a_run_that_ends_before_the_sweep_never_enters_the_open_index(ports, clock, backend):
    """Issue 32: the `open` index cost two write units a run (an entry at create, its removal at the end). A row
    is now written without it unless it is due already, and enters it only if the sweep finds it still open."""
    if backend != "moto":
        pytest.skip("SQLite keeps every open row in its index from the write: an entry costs nothing there")
    store = ports.store
    job = make_job(clock)
    shard = shard_of(job.job_id, ports.settings.shards)
    late = clock() - timedelta(seconds=ports.settings.reconcile_after_seconds())
    due_now, due_long_ago = new_execution(job, clock()), new_execution(job, late)
    store.put_executions([due_now, due_long_ago])
    # A row written long after its due time (a backfilled or caught-up slot) is in the index at once: a sweep
    # may have passed its time already. One due now is not.
    assert [s.open_shard is not None for s in sorted_scan(store)] == [True, False]
    store.claim(store.key_of(due_now), "w1", clock(), clock() + timedelta(seconds=30))
    store.finish(store.key_of(due_now), 1, ExecutionStatus.SUCCEEDED, clock())
    assert swept(ports, shard, clock()) == 0  # it ended: the sweep adds nothing
    item = store.client.get_item(
        TableName=store.executions_table,
        Key={"pk": {"S": store.key_of(due_now).pk}, "sk": {"S": store.key_of(due_now).sk}},
    )["Item"]
    assert "openShard" not in item and "openJob" not in item


def sorted_scan(store):
    return sorted(store.scan_open_executions(), key=lambda s: s.execution.due_at)


# --- control records ---------------------------------------------------------------------------------


def test_a_shard_lease_is_held_by_one_owner_until_it_ends_and_only_the_holder_moves_the_cursor(ports):
    store = ports.store
    assert store.get_control("preload#000") is None
    held = store.acquire_lease("preload#000", "p1", 1_000, 16_000)
    assert (held["leaseOwner"], held["leaseUntilMs"]) == ("p1", 16_000)
    assert store.acquire_lease("preload#000", "p2", 15_999, 31_000) is None
    assert store.advance_cursor("preload#000", "p2", 40_000) is False
    assert store.advance_cursor("preload#000", "p1", 40_000) is True
    assert store.acquire_lease("preload#000", "p1", 2_000, 17_000)["cursorMs"] == 40_000  # renewed
    taken = store.acquire_lease("preload#000", "p2", 17_000, 32_000)
    assert (taken["leaseOwner"], taken["cursorMs"]) == ("p2", 40_000)
    assert store.advance_cursor("preload#000", "p1", 50_000) is False
    assert store.advance_cursor("preload#404", "p1", 50_000) is False
    assert store.get_control("preload#000")["cursorMs"] == 40_000


def test_a_waiting_row_ended_failed_stays_open_until_its_owner_is_told(ports, clock):
    store = ports.store
    key = waiting(ports, clock)
    shard = int(key.pk.rsplit("#", 1)[1])
    failed = store.end_waiting(key, ExecutionStatus.FAILED, clock(), "poison")
    assert (failed.status, failed.skip_reason) == (ExecutionStatus.FAILED, "poison")
    swept(ports, shard, clock())
    assert [e.execution_id for e in store.open_executions(shard, 2**42)] == [failed.execution_id]
    assert [s.open_shard for s in store.scan_open_executions()] == [open_index_key(key)]
    store.mark_notified(key, clock())
    assert store.open_executions(shard, 2**42) == []
    assert list(store.scan_open_executions()) == []


# --- issue 12's store methods (the DynamoDB adapter gains them with the a-preloader branch) -----------


def needs(ports, method: str) -> None:
    if not hasattr(ports.store, method):
        pytest.skip(f"{type(ports.store).__name__} has no {method} before the a-preloader merge (issue 12)")


def test_the_open_set_is_read_in_bounded_steps_in_due_order_that_say_where_to_go_on(ports, clock):
    needs(ports, "open_page")
    store = ports.store
    job = make_job(clock)
    shard = shard_of(job.job_id, ports.settings.shards)
    rows = [new_execution(job, clock() + timedelta(minutes=m)) for m in range(7)]
    store.put_executions(rows)
    swept(ports, shard, clock() + timedelta(minutes=5))
    seen, token, steps = [], None, 0
    while True:
        page = store.open_page(shard, to_ms(clock() + timedelta(minutes=5)), 2, token)
        assert len(page.executions) <= 2
        seen += [e.execution_id for e in page.executions]
        steps += 1
        token = page.next_token
        if token is None:
            break
    assert seen == [e.execution_id for e in rows[:6]] and steps >= 3


def test_a_held_waiting_row_leaves_the_open_set_until_it_is_unheld(ports, clock):
    needs(ports, "hold_waiting")
    store = ports.store
    job = make_job(clock)
    shard = shard_of(job.job_id, ports.settings.shards)
    rows = [new_execution(job, clock() + timedelta(minutes=m)) for m in range(3)]
    store.put_executions(rows)
    held, running = store.key_of(rows[0]), store.key_of(rows[1])
    store.claim(running, "w1", clock(), clock() + timedelta(seconds=30))
    swept(ports, shard, clock() + timedelta(minutes=2))
    assert store.hold_waiting(held) is True
    assert store.hold_waiting(running) is False  # only a waiting row is held
    assert [e.execution_id for e in store.open_page(shard, 2**42, 10).executions] == [
        rows[1].execution_id,
        rows[2].execution_id,
    ]
    # A held row is still one of the job's open executions (cancel and resume find it)
    assert [e.execution_id for e in store.open_executions_of_job(job.job_id)] == [e.execution_id for e in rows]
    assert store.unhold_waiting(held) is True
    assert len(store.open_page(shard, 2**42, 10).executions) == 3
    store.end_waiting(held, ExecutionStatus.CANCELLED, clock())
    assert store.unhold_waiting(held) is False
    store.finish(running, 1, ExecutionStatus.SUCCEEDED, clock())
    assert [e.execution_id for e in store.open_executions_of_job(job.job_id)] == [rows[2].execution_id]


def test_the_cursor_records_where_the_reconciler_goes_on_and_a_lease_is_handed_back_on_request(ports):
    needs(ports, "release_lease")
    store = ports.store
    token = "2026120109#001 1796115600000#j_1.1796115600000"
    store.acquire_lease("preload#001", "p1", 1_000, 16_000)
    assert store.release_lease("preload#001", "p2") is False
    assert store.release_lease("preload#001", "p1") is True
    assert store.acquire_lease("preload#001", "p2", 2_000, 17_000)["leaseOwner"] == "p2"  # at once
    assert store.advance_cursor("preload#001", "p2", 40_000, token) is True
    record = store.get_control("preload#001")
    assert (record["cursorMs"], record["reconcileFrom"]) == (40_000, token)
    assert store.acquire_lease("preload#001", "p2", 3_000, 18_000)["reconcileFrom"] == token
    assert store.advance_cursor("preload#001", "p2", 50_000) is True
    assert "reconcileFrom" not in store.get_control("preload#001")
    assert store.get_control("preload#001")["cursorMs"] == 50_000


# --- named calendars -------------------------------------------------------------------------------


def test_calendars_are_created_replaced_listed_and_deleted_per_owner(ports):
    store = ports.store
    holidays = Calendar(name="holidays-de", dates=("2026-12-25", "2026-12-24/2026-12-26"), updated_ms=1)
    assert store.get_calendars("alice") == {}
    assert store.put_calendar("alice", holidays) is True
    assert store.put_calendar("alice", Calendar(name="office", dates=(), updated_ms=2)) is True
    assert store.get_calendars("alice") == {"holidays-de": holidays, "office": Calendar("office", (), 2)}
    assert store.get_calendars("bob") == {}  # another owner's are not his
    # Replacing a calendar is not a creation, and keeps the others
    replaced = Calendar(name="holidays-de", dates=("2027-01-01",), updated_ms=3)
    assert store.put_calendar("alice", replaced) is False
    assert store.get_calendars("alice")["holidays-de"] == replaced
    assert store.delete_calendar("alice", "holidays-de") is True
    assert store.delete_calendar("alice", "holidays-de") is False
    assert store.delete_calendar("bob", "office") is False
    assert store.get_calendars("alice") == {"office": Calendar("office", (), 2)}


def test_calendars_live_beside_other_control_records(ports):
    store = ports.store
    store.announce_handlers("default", "w1", ["demo.echo"], now_ms=0, until_ms=10_000)
    store.put_calendar("default", Calendar(name="x", dates=("2026-01-01",), updated_ms=1))
    assert store.announced_handlers("default", now_ms=1) == {"demo.echo"}
    assert store.get_calendars("default") == {"x": Calendar("x", ("2026-01-01",), 1)}


# --- a job edited in place ------------------------------------------------------------------------


def test_an_edit_stores_the_job_and_replaces_its_waiting_run_in_one_write(ports, clock):
    store = ports.store
    job = make_job(clock, schedule={"cron": "0 * * * *"})
    old = new_execution(job, clock() + timedelta(minutes=60))
    store.create_job(job, old)
    edited = job.model_copy(update={"name": "edited", "version": job.version + 1, "jitter_seconds": 600})
    new = new_execution(edited, clock() + timedelta(minutes=60))  # the same slot, spread otherwise
    store.edit_job(edited, [store.key_of(old)], new)
    assert store.get_job(job.job_id) == edited
    assert store.get_execution(store.key_of(old)) is None
    assert store.get_execution(store.key_of(new)) == new
    assert [e.execution_id for e in store.open_executions_of_job(job.job_id)] == [new.execution_id]


def test_an_edit_may_put_its_first_run_where_the_replaced_one_was(ports, clock):
    store = ports.store
    job = make_job(clock, schedule={"cron": "0 * * * *"})
    old = new_execution(job, clock() + timedelta(minutes=60))
    store.create_job(job, old)
    edited = job.model_copy(update={"job_class": "long", "version": job.version + 1})
    same_slot = new_execution(edited, old.scheduled_at)
    assert store.key_of(same_slot) == store.key_of(old)
    store.edit_job(edited, [store.key_of(old)], same_slot)
    assert store.get_execution(store.key_of(old)).job_class == "long"


def test_an_edit_is_refused_whole_if_a_replaced_run_started_or_the_version_moved(ports, clock):
    store = ports.store
    job = make_job(clock, schedule={"cron": "0 * * * *"})
    old = new_execution(job, clock() + timedelta(minutes=60))
    store.create_job(job, old)
    store.claim(store.key_of(old), "w1", clock(), clock() + timedelta(seconds=30))
    edited = job.model_copy(update={"name": "edited", "version": job.version + 1})
    new = new_execution(edited, clock() + timedelta(minutes=30))
    with pytest.raises(Conflict) as started:
        store.edit_job(edited, [store.key_of(old)], new)
    assert started.value.field == "version"
    stale = job.model_copy(update={"name": "stale", "version": job.version + 2})
    with pytest.raises(Conflict) as lost:
        store.edit_job(stale, [], None)
    assert lost.value.field == "version"
    assert store.get_job(job.job_id) == job
    assert store.get_execution(store.key_of(new)) is None
    assert store.get_execution(store.key_of(old)).status == ExecutionStatus.RUNNING


# --- backfill ------------------------------------------------------------------------------------


def test_the_ids_of_a_jobs_executions_in_a_slot_range_are_found_wherever_their_rows_are(ports, clock):
    store = ports.store
    job, other = make_job(clock, schedule={"cron": "* * * * *"}), make_job(clock, job_id="j_0000000000000002")
    store.create_job(job, None)
    slots = [clock() + timedelta(minutes=m) for m in range(4)]
    rows = [new_execution(job, s) for s in slots]
    manual = new_execution(job, slots[1], kind="manual")
    store.put_executions([*rows, manual, new_execution(other, slots[1])])
    # A retried row lives in another partition (its due time moved) and an ended one is still there
    key = store.key_of(rows[1])
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    store.move_for_retry(key, 1, rows[1].model_copy(update={"due_at": clock() + timedelta(hours=3), "attempt": 1}))
    store.end_waiting(store.key_of(rows[2]), ExecutionStatus.SKIPPED, clock(), "excluded")
    found = store.execution_ids_between(job.job_id, to_ms(slots[1]), to_ms(slots[3]))
    assert found == {rows[1].execution_id, manual.execution_id, rows[2].execution_id}
    assert store.execution_ids_between(job.job_id, to_ms(slots[3]) + 1, to_ms(slots[3]) + 60_000) == set()
