"""Listing pages bounded by the size of what they carry, not only by their count.

A synchronous Lambda response is capped at 6 MB, and an execution carries up to a 128 KB result and a
256 KB payload: fifty of them can pass the cap (API Gateway answers 502). A page stops adding items once
their JSON would pass MAX_PAGE_BODY_BYTES, and its cursor goes on after the last item it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from duetime.api.models import MAX_PAGE_BODY_BYTES

Item = TypeVar("Item", bound=BaseModel)
Fetch = Callable[[int, str | None], tuple[list[Item], str | None]]


def response_bytes(item: BaseModel) -> int:
    """The most bytes `item` takes in the response: its JSON, escaped as a string of the Lambda reply."""
    return len(json.dumps(item.model_dump_json(by_alias=True)))


def fitting(items: list[Item], budget: int) -> int:
    """How many of `items`, from the first, fit `budget` (at least one: no single item passes it)."""
    used = 0
    for count, item in enumerate(items):
        used += response_bytes(item)
        if used > budget:
            return max(1, count)
    return len(items)


def size_bounded(
    fetch: Fetch[Item], limit: int, cursor: str | None, budget: int = MAX_PAGE_BODY_BYTES
) -> tuple[list[Item], str | None]:
    """Up to `limit` items from `cursor` (`fetch(limit, cursor)` is the store's listing), as many as fit
    `budget`. When fewer fit, the listing is asked again for just that many, so that its own cursor
    points right after the last item the page holds (the stores' cursors are positions, not offsets); the
    answer is that second listing's, measured again in case rows came or went in between."""
    items, next_cursor = fetch(limit, cursor)
    while (count := fitting(items, budget)) < len(items):
        items, next_cursor = fetch(count, cursor)
    return items, next_cursor
