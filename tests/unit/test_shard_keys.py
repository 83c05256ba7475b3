"""The keys of issue 18: a row's `open` index key spreads its shard, and a reconciler page token resumes there."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime.definitions import OPEN_INDEX_SPREAD
from duetime.domain.keys import (
    ExecutionKey,
    bucket_of_partition,
    execution_id,
    open_index_key,
    open_index_partitions,
    open_page_after,
    shard_of_partition,
)


def test_a_row_s_open_index_key_is_its_shard_and_a_spread_of_its_execution_id():
    due = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    keys = [ExecutionKey.for_due("j_ab", execution_id("j_ab", due.replace(second=s)), due, 7) for s in range(30)]
    assert {bucket_of_partition(k.pk) for k in keys} == {"2026120109"}
    shard = shard_of_partition(keys[0].pk)
    assert {open_index_key(k) for k in keys} == set(open_index_partitions(shard))
    assert len(open_index_partitions(shard)) == OPEN_INDEX_SPREAD
    assert open_index_key(keys[0]) == open_index_key(keys[0])  # stable


def test_a_page_token_is_the_last_sort_key_taken_and_one_of_the_form_before_issue_18_starts_over():
    assert open_page_after(None) is None
    assert open_page_after("0001#j_a.0000000000001") == "0001#j_a.0000000000001"
    assert open_page_after("2026120109#003 0001#j_a.0000000000001") is None  # "pk sk": the form before
