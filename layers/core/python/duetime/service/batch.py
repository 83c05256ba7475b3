"""Batch creation (POST /jobs/batch): many jobs of one owner in one request, each checked, written and
answered on its own as POST /jobs would, with the writes of the batch made together.

Each item is atomic (the job, its first execution, its idempotency record and the owner's counters are
written together or not at all: the store's create_jobs), idempotent by its own key, and counted against
the owner's quotas one job at a time, so a batch crossing a quota answers 429 for exactly the items past it.
What the batch shares is the cost: one store call for the writes (one SQLite transaction; on DynamoDB a
transaction per group of jobs), one dispatch pass sending the first executions due soon (ten to an SQS
request) and one publish of the Created events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duetime.domain.errors import Conflict, DuetimeError
from duetime.domain.events import JobChange, job_event
from duetime.domain.models import Execution, Job, JobSpec
from duetime.service.context import Ports
from duetime.service.dispatch import dispatch
from duetime.service.jobs import (
    PreparedJob,
    creation_rate,
    idempotency_record_key,
    prepare_job,
    replay_after_conflict,
)


@dataclass(frozen=True)
class BatchItem:
    """One item of a batch: its job spec (or the error its parsing gave) and its idempotency key."""

    spec: JobSpec | DuetimeError
    idempotency_key: str | None = None


@dataclass(frozen=True)
class ItemOutcome:
    """What one item got: the job (created, or the one its key names) or the error it alone answers."""

    job: Job | None = None
    created: bool = False
    error: DuetimeError | None = None


def submit_jobs(ports: Ports, owner: str, items: Sequence[BatchItem], groups: Sequence[str] = ()) -> list[ItemOutcome]:
    """Create the items' jobs; one outcome an item, in order. An item's error is what POST /jobs would
    answer for it alone (InvalidInput, Forbidden, IdempotencyMismatch, Conflict, QuotaExceeded); any other
    error (the store unavailable) fails the whole request, as it would a single creation."""
    now = ports.clock()
    outcomes: list[ItemOutcome | None] = [None] * len(items)
    to_write: list[tuple[int, PreparedJob]] = []
    keys = [idempotency_record_key(owner, item.idempotency_key) for item in items if item.idempotency_key]
    records = ports.store.get_controls(keys) if keys else {}  # one read a hundred keys, not one a key
    for index, item in enumerate(items):
        if isinstance(item.spec, DuetimeError):
            outcomes[index] = ItemOutcome(error=item.spec)
            continue
        try:
            prepared = prepare_job(ports, owner, item.spec, item.idempotency_key, groups, now, records)
        except DuetimeError as exc:
            outcomes[index] = ItemOutcome(error=exc)
            continue
        if isinstance(prepared, Job):
            outcomes[index] = ItemOutcome(job=prepared)
        else:
            to_write.append((index, prepared))
    written = ports.store.create_jobs(
        [prepared.new for _, prepared in to_write], ports.quotas.max_active_jobs, creation_rate(ports, owner, now)
    )
    created: list[tuple[Job, Execution]] = []
    for (index, prepared), refusal in zip(to_write, written, strict=True):
        job, first = prepared.new.job, prepared.new.first
        assert first is not None
        if refusal is None:
            created.append((job, first))
            outcomes[index] = ItemOutcome(job=job.model_copy(update={"next_run_at": first.due_at}), created=True)
        else:
            outcomes[index] = _after_refusal(ports, owner, prepared, refusal)
    due = [first for _, first in created if first.due_at <= ports.dispatch_horizon(now)]
    if due:
        dispatch(ports, due, now, known_jobs={job.job_id: job for job, _ in created})
    if ports.events is not None and created:
        ports.events.publish([job_event(job, JobChange.CREATED, now) for job, _ in created])
    return [outcome or ItemOutcome() for outcome in outcomes]


def _after_refusal(ports: Ports, owner: str, prepared: PreparedJob, refusal: DuetimeError) -> ItemOutcome:
    """A Conflict on a keyed item is a duplicate of its key (in this batch or a concurrent request): the
    job that key created, as a replay answers it (or 422 for another body); any other refusal stands."""
    if isinstance(refusal, Conflict):
        try:
            existing = replay_after_conflict(ports, owner, prepared)
        except DuetimeError as exc:
            return ItemOutcome(error=exc)
        if existing is not None:
            return ItemOutcome(job=existing)
    return ItemOutcome(error=refusal)
