"""What ctx.checkpoint accepts: a JSON value of at most MAX_CHECKPOINT_BYTES, refused by name otherwise."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from duetime import CheckpointRejected, JobContext
from duetime.definitions import MAX_CHECKPOINT_BYTES
from duetime.domain.checkpoints import encode_checkpoint


def context(sink: list[str] | None = None) -> JobContext:
    ctx = JobContext("j_1.1796169600000", "j_1", 1, datetime(2026, 12, 1, tzinfo=UTC), {})
    if sink is not None:
        ctx.on_checkpoint = sink.append
    return ctx


def test_a_checkpoint_is_sent_as_compact_json():
    sent: list[str] = []
    context(sent).checkpoint({"count": 3, "name": "é"})
    assert sent == ['{"count":3,"name":"é"}']


@pytest.mark.parametrize("state", [{1, 2}, math.nan, "x" * MAX_CHECKPOINT_BYTES, object()])
def test_a_checkpoint_that_is_not_json_or_too_large_is_refused_naming_the_field(state):
    sent: list[str] = []
    with pytest.raises(CheckpointRejected) as refused:
        context(sent).checkpoint(state)
    assert refused.value.field == "checkpoint" and isinstance(refused.value, ValueError) and sent == []


def test_the_limit_is_on_the_json_bytes():
    assert encode_checkpoint("x" * (MAX_CHECKPOINT_BYTES - 2)) == '"' + "x" * (MAX_CHECKPOINT_BYTES - 2) + '"'
    with pytest.raises(CheckpointRejected):
        encode_checkpoint("é" * (MAX_CHECKPOINT_BYTES // 2))


def test_outside_a_workers_run_there_is_nowhere_to_record_it():
    with pytest.raises(RuntimeError, match="only while a worker runs"):
        context().checkpoint({"count": 1})
