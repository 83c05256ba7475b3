"""Several due runs in one SQS message (a carrier), and what the SQS adapter keeps of each carrier it received.

SQS charges by the request, and a request carries at most 10 messages. A run that is a message of its own
costs a tenth of a send, a receive and a delete: at 10,000 runs a second that is most of the scheduler's
SQS bill. Runs sent together to one queue with the same whole-second delay are due within the same second,
so they travel as one message of up to `runs_per_message` runs, and every request carries ten times the runs.

What a worker sees does not change: each run of a carrier is received as a message of its own, with a
part receipt (the carrier's, its handle marked `#p<i>`). The adapter keeps, for each carrier it received,
which parts are still open, and does for the carrier what its parts ask:

- a part deleted (its run is handled) is settled; the carrier is deleted once every part is settled;
- a part held (`hold`: its run is leased to this worker) keeps the carrier hidden at least that long.
  One visibility change covers the parts whose holds end within HOLD_SLACK_SECONDS of it, so the runs
  of a carrier, claimed and heartbeated within a second of one another, cost one change between them;
- a part given back (`extend`: hidden for a while and then received again, as a run due later, passed
  to another worker or released at shutdown does) is sent again as a message of its own, with that delay,
  and settled: the other parts' holds do not delay it, nor it theirs;
- a part left open (its lease was lost, its handling failed) comes back with the carrier when the
  carrier's visibility ends.

A carrier that comes back (received a second time: its worker died or was paused, or a part was left
open) is split: each of its runs is sent again as a message of its own and the carrier is deleted. A
process that received the carrier before sends only the runs it left open; another sends them all, and
the runs that had ended are dropped at their claims as any duplicate is. The others go on alone, so a run
that kills its worker reaches the dead-letter queue alone, never with the runs it travelled with.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from duetime.service.ports import DueMessage, queue_receipt, split_receipt

# A part receipt is its carrier's handle, this mark and the part's index (and the queue's mark, as any receipt).
# SQS handles (base64) never hold it.
PART_RECEIPT_MARK = "#p"
# A carrier's body: {"runs": [<a due message's fields>, ...]}. A message of one run keeps the plain body.
RUNS_FIELD = "runs"
# A run sent again alone (a carrier split, a part given back) carries how often its carrier was received
# before, so its receive count goes on from there (a run passed around hides longer each time it is back).
RECEIVED_BEFORE_FIELD = "receivedBefore"
# A hold that ends within this many seconds after the carrier's hidden time is covered by it; each change
# of the carrier's visibility hides it this much longer than asked, so the next holds are covered.
HOLD_SLACK_SECONDS = 2.0
# A carrier whose visibility ended this long ago is forgotten: its receipt is stale, its parts are another
# receiver's (or the next split's) now.
FORGET_AFTER_SECONDS = 60.0


def carrier_body(messages: list[DueMessage]) -> str:
    """The body that carries `messages`: a plain due message's body for one, a carrier's for more."""
    if len(messages) == 1:
        return messages[0].to_body()
    runs = [json.loads(m.to_body()) for m in messages]
    return json.dumps({RUNS_FIELD: runs}, separators=(",", ":"))


def runs_of(fields: Any) -> list[dict[str, Any]] | None:
    """The runs' fields of a carrier's body (read as JSON), or None for a plain body (one run, or a notice on
    a DLQ)."""
    runs = fields.get(RUNS_FIELD) if isinstance(fields, dict) else None
    if runs is None:
        return None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError("a carrier's runs are not a list of due messages")
    return runs


def packed(
    messages: Iterable[DueMessage], runs_per_message: int, delay_of: Callable[[DueMessage], int]
) -> Iterator[tuple[int, str, int]]:
    """(delay seconds, body, runs) of the messages to send for `messages`: runs with the same delay
    (`delay_of(message)`) together, up to `runs_per_message` a message, in the order they came."""
    by_delay: dict[int, list[DueMessage]] = {}
    for message in messages:
        by_delay.setdefault(delay_of(message), []).append(message)
    size = max(1, runs_per_message)
    for delay, group in by_delay.items():
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            yield delay, carrier_body(chunk), len(chunk)


def part_receipt(carrier: str, index: int) -> str:
    """The receipt of part `index` of the carrier received as `carrier`: the part mark goes on the carrier's
    handle, so the receipt still names the queue it came from (ports.split_receipt)."""
    queue, handle = split_receipt(carrier)
    return queue_receipt(queue, f"{handle}{PART_RECEIPT_MARK}{index}")


def split_part(receipt: str) -> tuple[str, int | None]:
    """(carrier receipt, part index) of a part receipt; (receipt, None) of any other."""
    queue, handle = split_receipt(receipt)
    carrier, mark, index = handle.rpartition(PART_RECEIPT_MARK)
    if mark and index.isdigit():
        return queue_receipt(queue, carrier), int(index)
    return receipt, None


@dataclass
class Carrier:
    """A carrier as its receiver keeps it: its runs, which are still open, and how long it is hidden."""

    receipt: str  # the carrier's own receipt (queue_receipt form)
    message_id: str  # SQS's id of the carrier: the same each time it is received
    runs: list[dict[str, Any]]
    receive_count: int  # SQS's count of its receives, this one included
    hidden_until: float  # until when (the adapter's clock, epoch seconds) the carrier is hidden at least
    open: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.open = set(range(len(self.runs)))


class Carriers:
    """The carriers this process received and has not finished with (thread-safe)."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall
        self._lock = threading.Lock()
        self._carriers: dict[str, Carrier] = {}

    def keep(self, carrier: Carrier) -> None:
        now = self.wall()
        with self._lock:
            for receipt in [r for r, c in self._carriers.items() if c.hidden_until < now - FORGET_AFTER_SECONDS]:
                del self._carriers[receipt]
            self._carriers[carrier.receipt] = carrier

    def take_back(self, message_id: str) -> Carrier | None:
        """The carrier with SQS id `message_id` as this process received it last, forgotten now (it came back;
        its open parts say which runs are still to send), or None if this process does not keep it."""
        with self._lock:
            for receipt, carrier in list(self._carriers.items()):
                if carrier.message_id == message_id:
                    del self._carriers[receipt]
                    return carrier
            return None

    def get(self, receipt: str) -> Carrier | None:
        with self._lock:
            return self._carriers.get(receipt)

    def settle(self, receipt: str, index: int) -> Carrier | None:
        """Settle part `index` of carrier `receipt`; returns the carrier if that was its last open part (it is
        forgotten then: delete it), else None. A part of a carrier not kept (forgotten) settles nothing."""
        with self._lock:
            carrier = self._carriers.get(receipt)
            if carrier is None:
                return None
            carrier.open.discard(index)
            if carrier.open:
                return None
            del self._carriers[receipt]
            return carrier

    def is_open(self, receipt: str, index: int) -> bool:
        """Whether part `index` of carrier `receipt` still needs the carrier (neither settled nor forgotten)."""
        with self._lock:
            carrier = self._carriers.get(receipt)
            return carrier is not None and index in carrier.open

    def hold(self, receipt: str, seconds: float) -> float | None:
        """The visibility (seconds from now) to give carrier `receipt` so it stays hidden `seconds` more, or
        None if it is hidden that long already (or not kept). The carrier is taken to be hidden until then."""
        now = self.wall()
        with self._lock:
            carrier = self._carriers.get(receipt)
            if carrier is None or carrier.hidden_until >= now + seconds:
                return None
            carrier.hidden_until = now + seconds + HOLD_SLACK_SECONDS
            return seconds + HOLD_SLACK_SECONDS

    def hold_failed(self, receipt: str) -> None:
        """The visibility change `hold` asked for failed: the next hold of the carrier changes it again."""
        with self._lock:
            carrier = self._carriers.get(receipt)
            if carrier is not None:
                carrier.hidden_until = 0.0

    def forget(self, receipts: Iterable[str]) -> None:
        with self._lock:
            for receipt in receipts:
                self._carriers.pop(split_part(receipt)[0], None)
