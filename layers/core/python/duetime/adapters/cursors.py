"""Opaque paging cursors: a store's start key bound to the scope it pages, checked when it comes back."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from duetime.definitions import MAX_CURSOR_CHARS, MAX_CURSOR_KEY_BYTES
from duetime.domain.errors import InvalidInput


def encode_cursor(scope: str, key: dict[str, Any] | None) -> str | None:
    """An opaque cursor bound to `scope` (the owner or job it pages), so it cannot page into another's."""
    if key is None:
        return None
    raw = json.dumps({"s": scope, "k": key}, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(scope: str, cursor: str | None, expect: dict[str, str | None]) -> dict[str, str] | None:
    """The start key in a cursor of `scope`; raises InvalidInput naming `cursor` for anything else.

    The key must have exactly the attribute names of `expect`, each a string, and those given a value must
    hold it (the owner, the jobId), so a hand-made cursor cannot name another owner's key or one the store
    would refuse (each value at most MAX_CURSOR_KEY_BYTES in UTF-8, the unit DynamoDB counts; a lone
    surrogate, which has no UTF-8 form, is refused too).
    """
    if not cursor:
        return None
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidInput(f"cursor is longer than {MAX_CURSOR_CHARS} characters", field="cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
        key = value["k"]
        valid = (
            value["s"] == scope
            and isinstance(key, dict)
            and set(key) == set(expect)
            and all(
                isinstance(key[name], str)
                and 0 < len(key[name].encode()) <= MAX_CURSOR_KEY_BYTES
                and (wanted is None or key[name] == wanted)
                for name, wanted in expect.items()
            )
        )
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        valid = False
    if not valid:
        raise InvalidInput("cursor is not valid here", field="cursor")
    return {str(name): str(v) for name, v in key.items()}
