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
    resume_open,
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


def test_a_page_token_resumes_at_its_partition_and_row_and_anything_else_starts_over():
    partitions = open_index_partitions(3)
    assert resume_open(partitions, None) == (0, None)
    assert resume_open(partitions, f"{partitions[2]} 2026120109#003 0001#j_a.1") == (
        2,
        {"pk": "2026120109#003", "sk": "0001#j_a.1"},
    )
    assert resume_open(partitions, f"{partitions[1]} - -") == (1, None)
    assert resume_open(partitions, "2026120109#003 0001#j_a.1") == (0, None)  # the form from before issue 18
    assert resume_open(partitions, f"{open_index_partitions(4)[1]} - -") == (0, None)  # another shard's
