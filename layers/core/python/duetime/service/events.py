"""Publishing duetime's events: a terminal run or a job change becomes an event on the ports' sink, and a
worker's batch publishes its events together (one PutEvents request per ten events on AWS)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from duetime.domain.events import Event, JobChange, job_event, run_event
from duetime.domain.models import Execution, Job
from duetime.service.context import EventSink, Ports


def run_ended(ports: Ports, execution: Execution | None, job: Job | None) -> None:
    """Publish the event of a run that ended (nothing for a run still open, or without a sink)."""
    if ports.events is None or execution is None:
        return
    event = run_event(execution, job)
    if event is not None:
        ports.events.publish([event])


def job_changed(ports: Ports, job: Job, change: JobChange, at: datetime | None = None) -> None:
    """Publish a job's state change, as the job is after it."""
    if ports.events is not None:
        ports.events.publish([job_event(job, change, at or ports.clock())])


class EventBuffer:
    """Holds the events published during a batch and hands them to the sink together at `flush`, so a
    batch of runs costs one publish (the sink sends them ten to a request: PutEvents' limit). Threads of
    one batch publish into it at once."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._held = threading.local()  # each thread's events held by held_until_stored

    def publish(self, events: Sequence[Event]) -> None:
        held: list[Event] | None = getattr(self._held, "events", None)
        if held is not None:
            held.extend(events)
            return
        with self._lock:
            self._events.extend(events)

    @contextmanager
    def held_until_stored(self) -> Iterator[None]:
        """The events this thread publishes inside the block join the buffer only if the block ends normally:
        around a batch of the store, they tell of what its transaction stored, and a batch that does not
        commit (it raises) takes its events with it."""
        held: list[Event] = []
        outer: list[Event] | None = getattr(self._held, "events", None)
        self._held.events = held
        try:
            yield
        finally:
            self._held.events = outer
        if outer is not None:  # nested: they go with the outer block's
            outer.extend(held)
            return
        with self._lock:
            self._events.extend(held)

    def flush(self) -> int:
        """Publish what was buffered (if anything); returns how many events that was."""
        with self._lock:
            events, self._events = self._events, []
        if events:
            self.sink.publish(events)
        return len(events)


def buffered(ports: Ports) -> tuple[Ports, EventBuffer | None]:
    """Ports whose events wait in a buffer until it is flushed (the same ports without a sink)."""
    if ports.events is None or isinstance(ports.events, EventBuffer):
        return ports, ports.events if isinstance(ports.events, EventBuffer) else None
    buffer = EventBuffer(ports.events)
    return replace(ports, events=buffer), buffer


@contextmanager
def batched_events(ports: Ports) -> Iterator[Ports]:
    """Ports whose events are published together when the block ends (a pre-loader run, a DLQ drain)."""
    batched, buffer = buffered(ports)
    try:
        yield batched
    finally:
        if buffer is not None and batched is not ports:
            buffer.flush()
