"""What a row can hold: a job's payload and a handler's result as JSON within their limits, error text truncated."""

from __future__ import annotations

import json
from typing import Any

from duetime.definitions import MAX_ERROR_BYTES, MAX_RESULT_BYTES

TRUNCATION_MARK = " [truncated]"


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


def truncate_error(text: str) -> str:
    """`text` cut to MAX_ERROR_BYTES of UTF-8 (on a character boundary), marked when it was cut."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_ERROR_BYTES:
        return text
    keep = MAX_ERROR_BYTES - len(TRUNCATION_MARK.encode())
    return encoded[:keep].decode("utf-8", "ignore") + TRUNCATION_MARK
