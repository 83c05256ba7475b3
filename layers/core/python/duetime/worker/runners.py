"""Threads that run handlers, each kept after a run for the next one instead of started per run.

Starting a thread costs little CPU, but `Thread.start` waits until the new thread has run, which in a busy
process means waiting for the GIL: measured on a 2-core machine it was a third of a worker slot's time per
quick run (`demo.echo`). A run still never waits for a thread: with none idle, a new one starts, so a
handler that overran its timeout and runs on (an in-process handler can only be asked to stop) holds its
own thread and nobody else's.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("duetime.worker")

# Idle threads kept beyond this many end after their run (a burst of overrunning handlers leaves no pile).
MAX_IDLE_RUNNERS = 64


class RunnerThreads:
    """Runs each callable at once in a thread of its own: an idle kept one, or a new one."""

    def __init__(self, name: str, max_idle: int = MAX_IDLE_RUNNERS) -> None:
        self.name, self.max_idle = name, max_idle
        self._idle: list[queue.SimpleQueue[Callable[[], object] | None]] = []
        self._lock = threading.Lock()
        self._started = 0
        self._closed = False

    def run(self, fn: Callable[[], object]) -> None:
        """Start `fn` now in an idle thread or a new one (never queued behind another run)."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self._started += 1
                number = self._started
        if inbox is not None:
            inbox.put(fn)
            return
        inbox = queue.SimpleQueue()
        inbox.put(fn)
        threading.Thread(target=self._loop, args=(inbox,), name=f"{self.name}-run-{number}", daemon=True).start()

    def _loop(self, inbox: queue.SimpleQueue[Callable[[], object] | None]) -> None:
        while (fn := inbox.get()) is not None:
            try:
                fn()
            except Exception:  # the callable reports its own outcome; this only keeps the thread alive
                log.exception("a handler run raised past its wrapper")
            with self._lock:
                if self._closed or len(self._idle) >= self.max_idle:
                    return
                self._idle.append(inbox)

    def close(self) -> None:
        """End the idle threads; those still running end after their run."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)
