"""A job's history on every adapter, whatever finds its rows: on DynamoDB a plain run of the schedule has no byJob
entry and is read by its slot's key under the timing the job had (domain/history.py); every other row keeps
its entry. History, find-by-id, the ids in a span and a job's open rows see them all, each once, across edits."""

from __future__ import annotations

from datetime import datetime, timedelta

from duetime.domain.history import MOST_SLOTS_A_PAGE
from duetime.domain.models import Execution, ExecutionStatus, Job, Schedule
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job


def _all_pages(store, job_id: str, size: int, newest_first: bool = True) -> list[str]:
    seen, cursor = [], None
    for _ in range(1000):
        page = store.list_executions(job_id, size, cursor, newest_first)
        assert len(page.items) <= size
        seen += [e.execution_id for e in page.items]
        if page.cursor is None:
            return seen
        cursor = page.cursor
    raise AssertionError("the pages never ended")


def _edited(job: Job, at: datetime, **changes: object) -> Job:
    return job.model_copy(update={**changes, "version": job.version + 1, "updated_at": at})


def _ended(store, execution: Execution, now: datetime) -> None:
    store.end_waiting(store.key_of(execution), ExecutionStatus.SKIPPED, now, "excluded")


def test_history_lists_every_run_across_an_edit_of_schedule_and_spread_with_run_nows_retries_and_backfills(
    ports, clock, backend
):
    store = ports.store
    job = make_job(clock, schedule={"cron": "*/10 * * * *"})
    start = clock()
    old = [new_execution(job, start + timedelta(minutes=m), by_slot=True) for m in (10, 20, 30, 40)]
    store.create_job(job, old[0])
    store.put_executions(old[1:])
    # A retried run's row moves to a later due; a backfilled slot from before the job and a run-now have their
    # own ids and due times.
    key = store.key_of(old[1])
    store.claim(key, "w1", clock(), clock() + timedelta(seconds=30))
    store.move_for_retry(key, 1, old[1].model_copy(update={"due_at": start + timedelta(hours=2), "attempt": 1}))
    backfilled = new_execution(job, start - timedelta(minutes=50), kind="backfill")
    manual = new_execution(job, start + timedelta(minutes=25), kind="manual")
    store.put_executions([backfilled, manual])
    clock.advance(35 * 60)
    # The edit at 09:35 moves the job to every 15 minutes, spread over 30 s: its waiting 09:40 run is replaced.
    edited = _edited(job, clock(), schedule=Schedule(cron="*/15 * * * *"), jitter_seconds=30)
    new = [new_execution(edited, start + timedelta(minutes=m), by_slot=True) for m in (45, 60, 75)]
    store.edit_job(edited, [store.key_of(old[3])], new[0])
    store.put_executions(new[1:])
    for row in [old[0], old[2], new[0]]:
        _ended(store, row, clock())
    clock.advance(45 * 60)

    ids = sorted(e.execution_id for e in [*old[:3], backfilled, manual, *new])
    assert _all_pages(store, job.job_id, 2) == ids[::-1]
    assert _all_pages(store, job.job_id, 3, newest_first=False) == ids
    assert [e.execution_id for e in store.iter_executions_of_job(job.job_id)] == ids
    assert [e.execution_id for e in store.executions_of_job(job.job_id, limit=3)] == ids[:-4:-1]
    for execution_id in ids:
        found = store.find_execution(job.job_id, execution_id)
        assert found is not None and found.execution_id == execution_id
    assert store.find_execution(job.job_id, old[3].execution_id) is None  # replaced by the edit
    span = store.execution_ids_between(job.job_id, 0, 10**13 - 1)
    assert span == set(ids)
    moved = store.find_execution(job.job_id, old[1].execution_id)
    assert moved is not None and moved.attempt == 1
    if backend == "moto":  # only the rows whose key does not follow from their slot have byJob entries
        entered = {backfilled.execution_id, manual.execution_id, old[1].execution_id}
        assert _by_job_entries(store, job.job_id) == entered


def _by_job_entries(store, job_id: str) -> set[str]:
    response = store.client.query(
        TableName=store.executions_table,
        IndexName="byJob",
        KeyConditionExpression="jobId = :j",
        ExpressionAttributeValues={":j": {"S": job_id}},
    )
    return {item["executionId"]["S"] for item in response["Items"]}


def test_a_follower_planned_under_the_timing_an_edit_replaced_is_still_found(ports, clock):
    """A pre-loader that read the job before the edit may create the follower of a slot it sent after the edit:
    under the old schedule and spread. The job's open rows, its history and find-by-id see it."""
    store = ports.store
    job = make_job(clock, schedule={"cron": "0 * * * *"}, jitter_seconds=20)
    first = new_execution(job, clock() + timedelta(hours=1), by_slot=True)
    store.create_job(job, first)
    edited = _edited(job, clock(), schedule=Schedule(cron="30 * * * *"), jitter_seconds=0)
    replacement = new_execution(edited, clock() + timedelta(minutes=30), by_slot=True)
    store.edit_job(edited, [store.key_of(first)], replacement)
    # The old timing's follower, written after the edit by a pre-loader that read the job before it.
    stale = new_execution(job, clock() + timedelta(hours=1), by_slot=True)
    assert store.put_execution(stale)

    open_ids = [e.execution_id for e in store.open_executions_of_job(job.job_id)]
    assert open_ids == [replacement.execution_id, stale.execution_id]
    assert [e.execution_id for e in store.list_executions(job.job_id, 10, None).items] == open_ids[::-1]
    assert store.find_execution(job.job_id, stale.execution_id) == stale


def test_a_long_pause_without_rows_is_paged_through_to_the_runs_before_it(ports, clock):
    """A minutely job with no rows for ten hours (paused): more slots than a page reads (MOST_SLOTS_A_PAGE), so
    newest-first pages walk the empty slots in bounded steps, each answering with a cursor, and reach the runs
    before the gap."""
    store = ports.store
    job = make_job(clock, schedule={"cron": "* * * * *"})
    before = [new_execution(job, clock() + timedelta(minutes=m), by_slot=True) for m in (1, 2)]
    store.create_job(job, before[0])
    store.put_execution(before[1])
    clock.advance(10 * 3600)
    assert MOST_SLOTS_A_PAGE < 10 * 60
    after = [new_execution(job, clock() + timedelta(minutes=m), by_slot=True) for m in (1, 2)]
    store.put_executions(after)
    ids = [e.execution_id for e in [*before, *after]]
    assert _all_pages(store, job.job_id, 3) == ids[::-1]
    assert _all_pages(store, job.job_id, 3, newest_first=False) == ids


def test_a_row_that_kept_its_index_entry_is_listed_once(ports, clock):
    """A row written before plain runs went without byJob entries (or any row whose writer did not mark it plain)
    is found by its entry and by its slot's key: it is listed, and counted, once."""
    store = ports.store
    job = make_job(clock, schedule={"cron": "* * * * *"})
    rows = [new_execution(job, clock() + timedelta(minutes=m), by_slot=True) for m in (1, 2, 3)]
    store.create_job(job, rows[0])
    store.put_executions([rows[1], rows[2].model_copy(update={"spread_seconds": None})])
    ids = [e.execution_id for e in rows]
    assert _all_pages(store, job.job_id, 2) == ids[::-1]
    assert store.execution_ids_between(job.job_id, 0, 10**13 - 1) == set(ids)
    assert [e.execution_id for e in store.open_executions_of_job(job.job_id)] == ids
