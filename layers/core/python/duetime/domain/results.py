"""What an execution row can hold: a handler's result as JSON within its limit, error text truncated."""

from __future__ import annotations

import json
from typing import Any

from duetime.definitions import MAX_ERROR_BYTES, MAX_RESULT_BYTES

TRUNCATION_MARK = " [truncated]"


class ResultRejected(ValueError):
    """A handler's result that cannot be stored: not JSON, or larger than MAX_RESULT_BYTES."""


def encode_result(result: Any) -> str:
    """The result as compact JSON; raises ResultRejected with the reason if it is not JSON or too large."""
    try:
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResultRejected(f"the handler's result is not JSON: {exc}") from exc
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_RESULT_BYTES:
        raise ResultRejected(f"the handler's result is {size} bytes as JSON; at most {MAX_RESULT_BYTES} are stored")
    return text


def truncate_error(text: str) -> str:
    """`text` cut to MAX_ERROR_BYTES of UTF-8 (on a character boundary), marked when it was cut."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_ERROR_BYTES:
        return text
    keep = MAX_ERROR_BYTES - len(TRUNCATION_MARK.encode())
    return encoded[:keep].decode("utf-8", "ignore") + TRUNCATION_MARK
