"""The worker's event buffer: events wait for the flush, and those published inside a batch of the store wait
for its commit (held_until_stored), a batch that raises taking its events with it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from duetime.domain.events import Event
from duetime.service.events import EventBuffer


class Sink:
    def __init__(self) -> None:
        self.published: list[list[str]] = []

    def publish(self, events: list[Event]) -> None:
        self.published.append([e.detail["n"] for e in events])


def event(n: str) -> Event:
    return Event("Execution Succeeded", datetime(2026, 12, 1, tzinfo=UTC), {"n": n})


def test_events_held_in_a_block_join_the_buffer_when_it_ends_and_are_dropped_when_it_raises():
    sink = Sink()
    buffer = EventBuffer(sink)
    buffer.publish([event("before")])
    with buffer.held_until_stored():
        buffer.publish([event("stored")])
        with buffer.held_until_stored():  # nested: they go with the outer block's
            buffer.publish([event("nested")])
        assert buffer.flush() == 1  # only what was published outside: the block's wait for its end
    with pytest.raises(RuntimeError), buffer.held_until_stored():
        buffer.publish([event("rolled back")])
        raise RuntimeError("the commit failed")
    assert buffer.flush() == 2
    assert sink.published == [["before"], ["stored", "nested"]]


def test_another_threads_events_are_not_held_by_this_threads_block():
    sink = Sink()
    buffer = EventBuffer(sink)
    with buffer.held_until_stored():
        other = threading.Thread(target=buffer.publish, args=([event("other thread")],))
        other.start()
        other.join()
        assert buffer.flush() == 1
    assert sink.published == [["other thread"]]
