"""What a row can hold: a job's payload and a handler's result as JSON within their limits, error text truncated."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from duetime.definitions import DYNAMODB_MAX_ITEM_BYTES, MAX_ERROR_BYTES, MAX_RESULT_BYTES

if TYPE_CHECKING:
    from duetime.domain.models import Execution

TRUNCATION_MARK = " [truncated]"
# What a row holds besides its payload, checkpoint, result and error texts: keys, ids, times, status, the
# attribute names (DynamoDB counts them too). A generous bound: a few hundred bytes are used.
ROW_FIXED_BYTES = 4 * 1024
ATTEMPT_FIXED_BYTES = 256  # one attempt record's worker id, times and outcome, without its error text


class ResultRejected(ValueError):
    """A handler's result that cannot be stored: not JSON, or larger than MAX_RESULT_BYTES."""


def compact_json(value: Any, what: str, limit: int) -> str:
    """`value` as compact JSON (UTF-8 text kept as it is): the form payloads and results are stored in and
    measured by. Raises ValueError naming `what` if it is not JSON (NaN and infinities included) or if it
    takes more than `limit` bytes of UTF-8."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from exc
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"{what} is {size} bytes as JSON; at most {limit} are stored")
    return text


def encode_result(result: Any) -> str:
    """The result as compact JSON; raises ResultRejected with the reason if it is not JSON or too large."""
    try:
        return compact_json(result, "the handler's result", MAX_RESULT_BYTES)
    except ValueError as exc:
        raise ResultRejected(str(exc)) from exc


def stored_json(value: Any) -> str:
    """`value` as the rows store it: compact JSON with UTF-8 text kept as it is (an escaped character would
    take up to 12 bytes, and a result measured as UTF-8 would no longer fit the row it was measured for)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def utf8_bytes(text: str | None) -> int:
    return 0 if text is None else len(text.encode("utf-8", "surrogatepass"))


def row_bytes_besides_result(execution: Execution) -> int:
    """An upper bound of the bytes `execution`'s row takes without a result: its payload and checkpoint as
    stored, every attempt's record and error text, and the fixed part."""
    checkpoint = execution.checkpoint
    return (
        ROW_FIXED_BYTES
        + (0 if execution.payload is None else utf8_bytes(stored_json(execution.payload)))
        + (0 if checkpoint is None else utf8_bytes(stored_json(checkpoint.state)))
        + utf8_bytes(execution.error)
        + sum(ATTEMPT_FIXED_BYTES + utf8_bytes(a.error) for a in execution.attempts)
        + ATTEMPT_FIXED_BYTES  # the error text the outcome's write may add is bounded by MAX_ERROR_BYTES below
        + MAX_ERROR_BYTES
    )


def check_fits_row(text: str, execution: Execution) -> None:
    """Raise ResultRejected, naming the sizes, if the result `text` (encode_result's) would take the row of
    `execution` past DynamoDB's item limit: both stores keep the same rule, so a run's outcome does not
    depend on the adapter."""
    size, besides = utf8_bytes(text), row_bytes_besides_result(execution)
    if size + besides > DYNAMODB_MAX_ITEM_BYTES:
        raise ResultRejected(
            f"the handler's result is {size} bytes as JSON; beside the run's payload, checkpoint and attempts"
            f" ({besides} bytes) its row holds at most {max(0, DYNAMODB_MAX_ITEM_BYTES - besides)}"
        )


def truncate_error(text: str) -> str:
    """`text` cut to MAX_ERROR_BYTES of UTF-8 (on a character boundary), marked when it was cut."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_ERROR_BYTES:
        return text
    keep = MAX_ERROR_BYTES - len(TRUNCATION_MARK.encode())
    return encoded[:keep].decode("utf-8", "ignore") + TRUNCATION_MARK
