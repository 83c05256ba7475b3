"""Retry a failed execution with a fresh attempt budget, list an owner's dead letters and redrive a selection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from duetime.definitions import MAX_REDRIVE
from duetime.domain.errors import Conflict, DuetimeError, InvalidInput, NotFound
from duetime.domain.keys import parse_execution_id
from duetime.domain.models import Delivery, Execution, ExecutionStatus, Job, JobStatus
from duetime.service.context import Ports
from duetime.service.job_ends import announce, one_off_reopening
from duetime.service.jobs import get_owned_job
from duetime.service.ports import DueMessage, Page


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which of the owner's dead letters a redrive retries: every given condition holds."""

    job_id: str | None = None
    failed_after: datetime | None = None
    failed_before: datetime | None = None

    def matches(self, execution: Execution) -> bool:
        finished = execution.finished_at
        return (
            (self.job_id is None or execution.job_id == self.job_id)
            and (self.failed_after is None or (finished is not None and finished >= self.failed_after))
            and (self.failed_before is None or (finished is not None and finished < self.failed_before))
        )


@dataclass(frozen=True)
class Refusal:
    """An execution a redrive did not retry, and why (the error a retry of it alone would answer)."""

    execution_id: str
    code: str
    message: str


@dataclass
class RedriveReport:
    """What a redrive did: the executions retried, those refused, and where a filtered redrive goes on."""

    retried: list[Execution] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    next_cursor: str | None = None


def retry_execution(ports: Ports, owner: str, execution_id: str) -> Execution:
    """Put the owner's `failed` execution back, due now, with a fresh retry budget.

    Same execution id (handlers dedupe on it) and its history kept; attempt numbers go on from where they
    stopped (the fencing token stays monotonic, so a stale worker of an old attempt is still refused),
    while `retryBase` = the attempt it failed at makes the budget count from this retry (should_retry and
    the claim's attempt limit count attempt - retryBase). The row moves to the partition of its new due
    time, back in the open index and out of the dead letters, in one transaction; then its message is
    sent (a crash between leaves an overdue open row, which the reconciler sends).
    Raises NotFound (no such execution of the owner's), Conflict (not failed, or its job cancelled)."""
    job_id, _ = parse_execution_id(execution_id)
    job = get_owned_job(ports, owner, job_id)
    execution = ports.store.find_execution(job_id, execution_id)
    if execution is None:
        raise NotFound(f"execution {execution_id!r} not found", field="executionId")
    return _retry_failed(ports, job, execution)


def _retry_failed(ports: Ports, job: Job, execution: Execution) -> Execution:
    if job.status == JobStatus.CANCELLED:
        raise Conflict("the job is cancelled; its executions cannot be retried", field="status")
    if execution.status != ExecutionStatus.FAILED:
        raise Conflict(f"execution is {execution.status.value}; only a failed one can be retried", field="status")
    if job.delivery == Delivery.AT_MOST_ONCE and execution.attempt > 0:
        # A failed attempt, reported or lost, was a start: a retry would start the slot a second time.
        raise Conflict(
            "the job's delivery is at-most-once: a run that started is never started again (run the job now "
            "for a new run)",
            field="delivery",
        )
    key = ports.store.key_of(execution)
    now = ports.clock()
    retried = _retried(execution, now)
    if ports.store.key_of(retried) == key:  # due in the very millisecond it was due before: a key of its own
        retried = _retried(execution, now + timedelta(milliseconds=1))
    # A completed one-off job's run retried: the job is active again, in the same write, until that run ends.
    reopening = one_off_reopening(job, execution, now)
    if not ports.store.retry_failed(key, execution.attempt, retried, ending=reopening):
        raise Conflict("the execution changed meanwhile (retried already?)", field="status")
    announce(ports, reopening)
    ports.queues.send([DueMessage.for_execution(retried, ports.store.key_of(retried))], now)
    return retried


def _retried(execution: Execution, due: datetime) -> Execution:
    """`execution` waiting again, due at `due`, its budget counted from its last attempt (its error is kept
    until the next attempt ends, as after an automatic retry)."""
    return execution.model_copy(
        update={
            "status": ExecutionStatus.SCHEDULED,
            "due_at": due,
            "lease_until": None,
            "worker_id": None,
            "claim_token": None,
            "finished_at": None,
            "result": None,
            "retry_base": execution.attempt,
        }
    )


def list_dead_letters(ports: Ports, owner: str, limit: int, cursor: str | None) -> Page[Execution]:
    """The owner's executions that failed for good, newest first (one query of the owner's dead letters);
    raises InvalidInput naming `cursor` for one not of this owner."""
    return ports.store.list_dead_letters(owner, limit, cursor)


def redrive(
    ports: Ports,
    owner: str,
    execution_ids: list[str] | None = None,
    selection: DeadLetterFilter | None = None,
    limit: int = MAX_REDRIVE,
    cursor: str | None = None,
) -> RedriveReport:
    """Retry each execution named in `execution_ids` (at most MAX_REDRIVE), or each of the owner's dead
    letters matching `selection` among the next `limit` of them from `cursor` (the report's `next_cursor`
    goes on; None: none is left). Each is retried as retry_execution does; one that cannot be is reported
    with the error it would answer alone, and the others go on."""
    if (execution_ids is None) == (selection is None):
        raise InvalidInput("give either executionIds or a filter (jobId, failedAfter, failedBefore)", field="body")
    if not 1 <= limit <= MAX_REDRIVE:
        raise InvalidInput(f"limit must be 1..{MAX_REDRIVE}", field="limit")
    report = RedriveReport()
    if execution_ids is not None:
        if len(execution_ids) > MAX_REDRIVE:
            raise InvalidInput(f"at most {MAX_REDRIVE} executionIds per redrive", field="executionIds")
        for execution_id in dict.fromkeys(execution_ids):  # each once, in the order given
            _retry_one(report, execution_id, partial(retry_execution, ports, owner, execution_id))
        return report
    assert selection is not None
    page = ports.store.list_dead_letters(owner, limit, cursor)
    jobs: dict[str, Job] = {}

    def retry_listed(execution: Execution) -> Execution:
        if execution.job_id not in jobs:  # each job read once per request
            jobs[execution.job_id] = get_owned_job(ports, owner, execution.job_id)
        return _retry_failed(ports, jobs[execution.job_id], execution)

    for listed in page.items:
        if selection.matches(listed):
            _retry_one(report, listed.execution_id, partial(retry_listed, listed))
    report.next_cursor = page.cursor
    return report


def _retry_one(report: RedriveReport, execution_id: str, retry: Callable[[], Execution]) -> None:
    try:
        report.retried.append(retry())
    except DuetimeError as exc:
        report.refused.append(Refusal(execution_id, exc.code, str(exc)))
