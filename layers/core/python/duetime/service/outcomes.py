"""How a worker's handling of a due message ends: the claim's verdict, the run's result, and what each
outcome means for the message. Plain values, no I/O: a handler's child process imports them cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class MessageFate(StrEnum):
    """What becomes of a due message once a worker is done with it."""

    DELETE = "delete"  # handled for good: the message is deleted (by the worker, or by the SQS event source)
    CHANGE_VISIBILITY = "change_visibility"  # kept, hidden until a time the worker chose (it is back then)
    REDELIVER = "redeliver"  # kept as it is: it comes back when the visibility it shares with a lease ends


class ClaimVerdict(StrEnum):
    CLAIMED = "claimed"  # this worker holds the new attempt: run it
    DONE = "done"  # nothing to run (terminal, moved, skipped or cancelled): delete the message
    HELD = "held"  # the job is paused: delete the message, the row waits for resume
    BUSY = "busy"  # a run waiting its turn (catch-up, serial backfill): sent again for later, this one goes
    PASSED = "passed"  # this worker cannot run the job's handler but another serves it: hide it briefly
    LIMITED = "limited"  # its rate limit or a concurrency cap holds it back: sent again for later, this one goes


class RunOutcome(StrEnum):
    """How a worker's handling of one message ended, and so what becomes of the message (`fate`)."""

    EARLY = "early"  # received well before it is due: hidden until then
    DONE = "done"  # nothing to run (ended, moved, a duplicate of a held attempt)
    HELD = "held"  # the job is paused: the row waits for resume, the message goes
    BUSY = "busy"  # waits for its job's running one: a fresh copy waits (never aging to the DLQ), this goes
    PASSED = "passed"  # another worker serves the handler: hidden briefly for it
    SUCCEEDED = "succeeded"  # ran and its result is stored
    FAILED = "failed"  # ran and failed: retried (a new message) or failed for good
    LOST = "lost"  # the lease was lost while it ran: the attempt is no longer this worker's to report
    STALE = "stale"  # a newer attempt fenced out the completion
    RELEASED = "released"  # handed back at shutdown: visible again at once for another worker
    ERROR = "error"  # handling raised before it ended (the store or queue failed): comes back to be retried
    LIMITED = "limited"  # held back by its rate limit or a concurrency cap: a copy waits, this message goes

    @property
    def fate(self) -> MessageFate:
        return _FATES[self]

    @property
    def keeps_message(self) -> bool:
        """True when the message must stay queued (an SQS event source must report it as a failure)."""
        return self.fate != MessageFate.DELETE

    @classmethod
    def of_claim(cls, verdict: ClaimVerdict) -> RunOutcome:
        """The outcome of a message whose claim did not give this worker a run."""
        if verdict == ClaimVerdict.CLAIMED:
            raise ValueError("a claimed attempt ends in the outcome of its run")
        return cls(verdict.value)


_FATES = {
    RunOutcome.EARLY: MessageFate.CHANGE_VISIBILITY,
    RunOutcome.DONE: MessageFate.DELETE,
    RunOutcome.HELD: MessageFate.DELETE,
    RunOutcome.BUSY: MessageFate.DELETE,
    RunOutcome.PASSED: MessageFate.CHANGE_VISIBILITY,
    RunOutcome.SUCCEEDED: MessageFate.DELETE,
    RunOutcome.FAILED: MessageFate.DELETE,
    RunOutcome.LOST: MessageFate.REDELIVER,
    RunOutcome.STALE: MessageFate.REDELIVER,
    RunOutcome.RELEASED: MessageFate.CHANGE_VISIBILITY,
    RunOutcome.ERROR: MessageFate.REDELIVER,
    RunOutcome.LIMITED: MessageFate.DELETE,
}


@dataclass(frozen=True)
class RunResult:
    """What one run of a handler gave: a result to store, or an error and whether another attempt may help."""

    succeeded: bool
    result: Any = None
    error: str | None = None
    retryable: bool = True

    @classmethod
    def success(cls, result: Any) -> RunResult:
        return cls(succeeded=True, result=result)

    @classmethod
    def failure(cls, error: str, retryable: bool = True) -> RunResult:
        return cls(succeeded=False, error=error, retryable=retryable)
