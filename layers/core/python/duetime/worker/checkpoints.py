"""A run's checkpoints on their way to the row: written in the heartbeat's fenced write, at most once per
CHECKPOINT_MIN_SECONDS, the newest waiting for the next heartbeat or the run's end, never lost on the way."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from duetime.definitions import CHECKPOINT_MIN_SECONDS
from duetime.domain.errors import StaleAttempt
from duetime.service.executions import Lease
from duetime.worker.registry import JobContext

log = logging.getLogger("duetime.worker")


class Checkpointer:
    """Takes a handler's checkpoints (JobContext.on_checkpoint) and writes them through its attempt's lease.

    A checkpoint offered at least CHECKPOINT_MIN_SECONDS after the last write is written at once, in the
    handler's thread, so a refusal reaches the handler as StaleAttempt. One offered sooner waits (a newer
    one replaces it) and rides on the next heartbeat, or on the flush before the run's outcome is written.
    A run that never checkpoints costs no write. Writes are serialized, so an older state never lands after
    a newer one."""

    def __init__(self, lease: Lease, context: JobContext, min_seconds: float = CHECKPOINT_MIN_SECONDS) -> None:
        self.lease, self.context, self.min_seconds = lease, context, min_seconds
        self._lock = threading.Lock()
        self._pending: str | None = None
        self._last_write = -float("inf")
        self.lost = False

    def offer(self, checkpoint: str) -> None:
        """A handler's checkpoint (compact JSON text); raises StaleAttempt once the attempt is fenced out."""
        with self._lock:
            self._check_held()
            self._pending = checkpoint
            if time.monotonic() - self._last_write >= self.min_seconds:
                self._write(with_heartbeat=False, quiet=True)

    def heartbeat(self) -> None:
        """Renew the lease, recording the waiting checkpoint in the same write if there is one; raises
        StaleAttempt if the attempt no longer holds the row (and tells the handler to stop)."""
        with self._lock:
            if self._pending is None:
                self._fenced(self.lease.extend)
            else:
                self._write(with_heartbeat=True, quiet=False)

    def flush(self) -> None:
        """Write the waiting checkpoint, if any, before the run's outcome (a retry carries it on). Raises
        StaleAttempt if the attempt no longer holds the row."""
        with self._lock:
            if self._pending is not None and not self.lost:
                self._write(with_heartbeat=False, quiet=False)

    def _write(self, with_heartbeat: bool, quiet: bool) -> None:
        """Write the waiting checkpoint. A failure other than a refusal keeps it waiting for the next try
        (logged, not raised, when `quiet`: a handler is not failed by a store that hiccuped)."""
        checkpoint = self._pending
        assert checkpoint is not None
        try:
            self._fenced(lambda: self.lease.record_checkpoint(checkpoint, with_heartbeat))
        except StaleAttempt:
            raise
        except Exception:
            if not quiet:
                raise
            log.exception("recording a checkpoint failed; it is written with the next heartbeat")
            return
        self._pending = None  # under the lock: nothing newer came meanwhile
        self._last_write = time.monotonic()

    def _fenced(self, write: Callable[[], object]) -> None:
        """Run one fenced write; a refusal marks the attempt lost, tells the handler to stop and is raised."""
        try:
            write()
        except StaleAttempt:
            self.lost = True
            self._pending = None
            self.context.cancelled.set()
            log.warning("%s attempt %s was fenced out of its row", self.context.execution_id, self.lease.attempt)
            self._check_held()

    def _check_held(self) -> None:
        if self.lost:
            raise StaleAttempt(
                f"attempt {self.lease.attempt} no longer holds {self.context.execution_id}: "
                "another attempt runs it, so this one's checkpoints are refused",
                field="attempt",
            )
