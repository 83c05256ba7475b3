"""Shard counts per due-hour bucket (issue 18), on every adapter: fixed by the first writer, never changed,
so stores configured with different `shards` (a redeploy, `duetime local --shards`) agree on every key."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from duetime.adapters.aws.store import DynamoStore
from duetime.adapters.sqlite.store import SqliteStore
from duetime.definitions import OPEN_INDEX_SPREAD
from duetime.domain.keys import (
    ExecutionKey,
    hour_bucket,
    open_index_key,
    open_index_partitions,
    shard_of,
    shard_of_partition,
)
from duetime.domain.models import ExecutionStatus
from duetime.service.dispatch import new_execution

from tests.contract.conftest import make_job, swept


def restarted(store, shards: int):
    """The same tables or file as `store`, seen by a process configured with `shards` (its own cache)."""
    settings = replace(store.settings, shards=shards)
    if isinstance(store, SqliteStore):
        return SqliteStore(store.db, settings, store.epoch_seconds)
    assert isinstance(store, DynamoStore)
    return DynamoStore(store.client, settings)


def test_a_bucket_keeps_the_shard_count_its_first_writer_fixed_whatever_a_later_process_is_configured_with(
    ports, clock
):
    store = ports.store  # 4 shards (tests/conftest.py)
    jobs = [make_job(clock, job_id=f"j_{i:016x}") for i in range(1, 7)]
    # Jobs whose shard differs under 4 and 7 shards, so a key derived from the wrong count would miss
    assert any(shard_of(job.job_id, 4) != shard_of(job.job_id, 7) for job in jobs)
    now_bucket, later = clock(), clock() + timedelta(hours=3)
    assert store.recorded_shards([hour_bucket(now_bucket), hour_bucket(later)]) == {}
    rows = [new_execution(job, now_bucket + timedelta(minutes=5)) for job in jobs]
    assert all(store.put_execution(row) for row in rows)  # the first write fixes the bucket at 4
    assert store.recorded_shards([hour_bucket(now_bucket), hour_bucket(later)]) == {hour_bucket(now_bucket): 4}

    wider = restarted(store, 7)
    # The restarted process derives every key of the fixed bucket from 4 shards: each row is found
    for row in rows:
        assert (
            wider.key_of(row) == store.key_of(row) == ExecutionKey.for_due(row.job_id, row.execution_id, row.due_at, 4)
        )
        assert wider.get_execution(wider.key_of(row)) == row
    assert wider.shards_of_bucket(hour_bucket(now_bucket)) == 4
    # ...and fixes a bucket nobody wrote yet with its own count, which the first process then follows
    late_rows = [new_execution(job, later) for job in jobs]
    assert all(wider.put_execution(row) for row in late_rows)
    assert store.shards_of_bucket(hour_bucket(later)) == 7
    for row in late_rows:
        assert store.key_of(row) == wider.key_of(row) == ExecutionKey.for_due(row.job_id, row.execution_id, later, 7)
        assert store.get_execution(store.key_of(row)) == row


def test_of_two_writers_fixing_one_bucket_the_first_wins_and_the_other_takes_its_count(ports, clock):
    first, second = restarted(ports.store, 5), restarted(ports.store, 9)
    bucket = hour_bucket(clock() + timedelta(hours=1))
    # Both read the bucket as not fixed, then both try to fix it: a conditional write, so one wins
    assert first.recorded_shards([bucket]) == second.recorded_shards([bucket]) == {}
    assert first._fix_bucket_shards(bucket, 5) == 5
    assert second._fix_bucket_shards(bucket, 9) == 5
    assert second.shards_of_bucket(bucket) == first.shards_of_bucket(bucket) == 5
    assert restarted(ports.store, 1).recorded_shards([bucket]) == {bucket: 5}


def test_the_shards_the_pre_loader_visits_grow_with_every_bucket_fixed_wider_and_never_shrink(ports, clock):
    assert ports.store.most_shards() == 4
    wider, narrower = restarted(ports.store, 12), restarted(ports.store, 2)
    wider.shards_of_bucket(hour_bucket(clock() + timedelta(hours=2)))
    narrower.shards_of_bucket(hour_bucket(clock() + timedelta(hours=3)))
    # A row of the 12-shard bucket may sit in shard 11: whoever pre-loads visits 12 shards
    assert narrower.most_shards() == wider.most_shards() == ports.store.most_shards() == 12
    assert restarted(ports.store, 20).most_shards() == 20  # the configured count, when it is more


def test_open_rows_of_a_shard_spread_over_its_index_partitions_and_every_one_is_read(ports, clock):
    store = ports.store
    job = make_job(clock)
    rows = [new_execution(job, clock() + timedelta(seconds=s)) for s in range(40)]
    store.put_executions(rows)
    keys = [store.key_of(row) for row in rows]
    shard = shard_of_partition(keys[0].pk)
    swept(ports, shard, clock() + timedelta(minutes=1))
    used = {open_index_key(key) for key in keys}
    # One job's rows, all in one base partition, use every index partition of the shard
    assert used == set(open_index_partitions(shard)) and len(used) == OPEN_INDEX_SPREAD
    assert {s.open_shard for s in store.scan_open_executions()} == used
    assert len(store.open_executions(shard, 2**42)) == 40
    seen, token = [], None
    while True:
        page = store.open_page(shard, 2**42, 7, token)
        assert len(page.executions) <= 7
        seen += [e.execution_id for e in page.executions]
        token = page.next_token
        if token is None:
            break
    assert seen == [row.execution_id for row in rows]  # in due order across the shard's index partitions


def test_a_page_token_of_another_form_starts_the_shard_over(ports, clock):
    store = ports.store
    job = make_job(clock)
    rows = [new_execution(job, clock() + timedelta(seconds=s)) for s in range(3)]
    store.put_executions(rows)
    shard = shard_of_partition(store.key_of(rows[0]).pk)
    swept(ports, shard, clock() + timedelta(minutes=1))
    old_form = f"{store.key_of(rows[2]).pk} {store.key_of(rows[2]).sk}"  # a token from before issue 18
    assert len(store.open_page(shard, 2**42, 10, old_form).executions) == 3


def test_a_row_indexed_under_the_old_open_key_is_moved_to_its_new_one(ports, clock):
    store = ports.store
    job = make_job(clock)
    row = new_execution(job, clock() + timedelta(minutes=1))
    store.put_execution(row)
    key = store.key_of(row)
    shard = shard_of_partition(key.pk)
    legacy = f"{shard:03d}"  # how rows written before issue 18 are indexed
    _index_under(store, key, legacy)
    assert store.open_executions(shard, 2**42) == []
    assert store.reindex_open(key, legacy) is True
    assert [e.execution_id for e in store.open_executions(shard, 2**42)] == [row.execution_id]
    assert store.reindex_open(key, legacy) is False  # moved already
    store.end_waiting(key, ExecutionStatus.CANCELLED, clock())
    assert store.reindex_open(key, open_index_key(key)) is False  # left the index: stays out


def test_the_buckets_that_hold_rows_are_listed_for_the_migration(ports, clock):
    store = ports.store
    job = make_job(clock)
    store.put_executions([new_execution(job, clock() + timedelta(hours=h)) for h in (0, 0, 2, 26)])
    assert store.stored_buckets() == {hour_bucket(clock() + timedelta(hours=h)) for h in (0, 2, 26)}


def _index_under(store, key, value: str) -> None:
    if isinstance(store, SqliteStore):
        with store.db.write() as conn:
            conn.execute("UPDATE executions SET open_shard = ? WHERE pk = ? AND sk = ?", (value, key.pk, key.sk))
        return
    store.client.update_item(
        TableName=store.executions_table,
        Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}},
        UpdateExpression="SET openShard = :v",
        ExpressionAttributeValues={":v": {"S": value}},
    )
