"""A handler's checkpoint: a small JSON value, measured and refused as payloads and results are."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from duetime.definitions import MAX_CHECKPOINT_BYTES
from duetime.domain.errors import InvalidInput
from duetime.domain.results import compact_json

if TYPE_CHECKING:
    from duetime.domain.models import Checkpoint, Execution

# The models (pydantic) are imported where a row's checkpoint is read or written, not here: a handler's child
# process imports this module (ctx.checkpoint, through duetime.worker.registry) and nothing of the models.


class CheckpointRejected(InvalidInput, ValueError):
    """A checkpoint that cannot be recorded: not JSON, or larger than MAX_CHECKPOINT_BYTES (field `checkpoint`).
    A ValueError too, so a handler may catch it as bad input of its own making."""


def encode_checkpoint(state: Any) -> str:
    """`state` as the compact JSON text stored on the row; raises CheckpointRejected naming `checkpoint`."""
    try:
        return compact_json(state, "checkpoint", MAX_CHECKPOINT_BYTES)
    except ValueError as exc:
        raise CheckpointRejected(str(exc), field="checkpoint") from exc


def decode_checkpoint(text: str | None, attempt: Any, recorded_ms: Any) -> Checkpoint | None:
    """The Checkpoint a row stores as its text, the attempt that wrote it and when (None if it has none)."""
    from duetime.domain.models import Checkpoint, from_ms

    if text is None:
        return None
    return Checkpoint(state=json.loads(text), attempt=int(attempt), recorded_at=from_ms(int(recorded_ms)))


def checkpoint_attributes(execution: Execution) -> dict[str, Any]:
    """How both stores keep a row's checkpoint (nothing on a row that never checkpointed): its JSON text,
    the attempt that wrote it and when, as `checkpoint`, `checkpointAttempt` and `checkpointMs`."""
    from duetime.domain.models import to_ms

    checkpoint = execution.checkpoint
    if checkpoint is None:
        return {}
    return {
        "checkpoint": json.dumps(checkpoint.state, separators=(",", ":"), ensure_ascii=False),
        "checkpointAttempt": checkpoint.attempt,
        "checkpointMs": to_ms(checkpoint.recorded_at),
    }
