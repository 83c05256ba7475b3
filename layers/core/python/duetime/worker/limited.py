"""The worker's side of rate limits and concurrency caps: a run held back is sent again for later (or waited
for, when its start is near), and a run holding slots renews them with its lease and gives them back."""

from __future__ import annotations

import time

from duetime.definitions import LIMIT_SLEEP_MS
from duetime.domain.errors import StaleAttempt
from duetime.domain.models import Execution, Job, to_ms
from duetime.service import limits
from duetime.service.context import Ports
from duetime.service.executions import Lease, Success
from duetime.service.outcomes import RunResult
from duetime.service.ports import DueMessage


def wait_briefly(ports: Ports, deferred: DueMessage) -> bool:
    """Sleep until the deferred run's reserved start if it is within LIMIT_SLEEP_MS (cheaper than sending the
    message again); False if it is further out, or the run waits for a slot (it must look again later)."""
    if deferred.limit_ready_ms is None or deferred.not_before_ms is not None:
        return False
    wait_ms = deferred.limit_ready_ms - to_ms(ports.clock())
    if wait_ms > LIMIT_SLEEP_MS:
        return False
    if wait_ms > 0:
        time.sleep(wait_ms / 1000)
    return True


def send_again(ports: Ports, deferred: DueMessage) -> None:
    """Queue the deferred copy of a held-back run, visible when it should look again. The caller then deletes
    the message it received: the copy is sent first, so a crash between the two leaves a duplicate (the claim
    drops it), never no message."""
    ports.queues.send([deferred], ports.clock())


class SlotLease(Lease):
    """A claimed attempt's lease that also holds concurrency slots: they are renewed with it (a dead
    worker's slot ends with its lease: no leak) and given back when the attempt ends or is released."""

    def __init__(self, lease: Lease, slots: tuple[str, ...], holder: str) -> None:
        super().__init__(lease.ports, lease.key, lease.execution, lease.job_class, lease.receipt)
        self.slots, self.holder = slots, holder

    def extend(self) -> Execution:
        """Extend the lease and its slots; raises StaleAttempt, the run given up (its lease ended now, its message
        visible), if a slot is no longer held. That happens to a worker stalled past its lease that nobody took
        the run over from: the row lets it go on, but its slots ended with the lease and other runs may have taken
        their places. Going on would put the cap one over (the simulation, seed 9814 with every flag: a cap of 3
        held 4 runs); the run is fenced out as a stale attempt is, and another attempt takes it up within its
        caps."""
        updated = super().extend()
        if updated.lease_until is not None and not limits.renew_slots(
            self.ports, self.slots, self.holder, to_ms(updated.lease_until)
        ):
            self.release()
            raise StaleAttempt(f"attempt {updated.attempt}'s concurrency slot ended with its lease and was not kept")
        return updated

    def release(self) -> bool:
        try:
            return super().release()
        finally:
            limits.release_slots(self.ports, self.slots, self.holder)

    def success(self, outcome: RunResult, job: Job | None = None) -> Success | None:
        return None  # stored by complete, which gives the slots back after

    def complete(self, outcome: RunResult, job: Job | None = None) -> Execution:
        try:
            return super().complete(outcome, job)
        finally:
            limits.release_slots(self.ports, self.slots, self.holder)


def with_slots(lease: Lease, slots: tuple[str, ...], holder: str) -> Lease:
    """The lease itself when the run holds no slot (no extra calls), else one that keeps its slots."""
    return SlotLease(lease, slots, holder) if slots else lease
