"""What a handler module imports to register itself: JobContext, PermanentFailure and `@handler`, with the
table it registers into. The registry (duetime.worker.registry) looks names up in that table and loads the
built-in handlers (duetime.worker.demo), which import this module, so neither imports the other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from duetime.domain.checkpoints import encode_checkpoint


class PermanentFailure(Exception):
    """Raised by a handler to fail its execution for good: no retry, straight to the DLQ."""


@dataclass
class JobContext:
    """What a handler receives. `execution_id` is the idempotency key: the same on every attempt."""

    execution_id: str
    job_id: str
    attempt: int
    scheduled_at: datetime
    payload: dict[str, Any]
    owner: str = ""
    # Who claimed this attempt and the claim's secret: what a target outside the worker (a Lambda function,
    # an ECS task) names to heartbeat or complete the attempt itself over the worker routes.
    worker_id: str = ""
    claim_token: str = field(default="", repr=False)
    cancelled: threading.Event = field(default_factory=threading.Event)
    # The state the last attempt of this execution recorded with checkpoint() (None if none did): where a
    # retry, a takeover after a lost worker or a manual retry resumes.
    last_checkpoint: Any = None
    # Where checkpoint() sends the state's JSON text: the worker's Checkpointer (or, in a child process,
    # the channel to the worker). None outside a worker's run.
    on_checkpoint: Callable[[str], None] | None = field(default=None, repr=False)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; returns False early if the run was told to stop (timeout, lost lease)."""
        return not self.cancelled.wait(seconds)

    def checkpoint(self, state: Any) -> None:
        """Record `state` (a JSON value of at most MAX_CHECKPOINT_BYTES) as this run's progress: the next
        attempt of the execution receives it as `last_checkpoint`. Written with the heartbeat's fenced write,
        at most once per CHECKPOINT_MIN_SECONDS (a newer state offered sooner replaces the waiting one and is
        written at the next heartbeat or the run's end). Raises CheckpointRejected (a ValueError) for a
        state that is not JSON or too large, and StaleAttempt once this attempt has lost the execution."""
        text = encode_checkpoint(state)
        if self.on_checkpoint is None:
            raise RuntimeError("checkpoints are recorded only while a worker runs the attempt")
        self.on_checkpoint(text)


HandlerFn = Callable[[JobContext], Any]


@dataclass(frozen=True)
class RegisteredHandler:
    """A registered function and how it runs: in a child process the worker kills at the timeout, or,
    `in_process`, in a thread of the worker that can only be asked to stop (its `cancelled` flag)."""

    name: str
    fn: HandlerFn
    in_process: bool

    @property
    def module(self) -> str:
        return str(self.fn.__module__)


# Every handler this process registered, by name: what the registry looks up and its workers announce.
registered_handlers: dict[str, RegisteredHandler] = {}


def handler(name: str, in_process: bool = False) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn` under `name`, e.g. `@handler("billing.generate_invoices")`.

    It runs in a child process that is killed at the job's timeout (or when the attempt is lost); with
    `in_process=True` it runs in the worker's own process, sharing its state, and is only told to stop.
    """

    def register(fn: HandlerFn) -> HandlerFn:
        registered_handlers[name] = RegisteredHandler(name, fn, in_process)
        return fn

    return register
