"""Worker-side use-cases: claim under a lease, heartbeat, complete, retry, dead-letter, release."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from duetime.definitions import DEFAULT_JOB_CLASS, RUNNING_DUE_MARGIN_SECONDS, SQS_MAX_DELAY_SECONDS
from duetime.domain.catchup import plan_catch_up
from duetime.domain.errors import Conflict, NotFound, StaleAttempt
from duetime.domain.exclusions import Exclusions
from duetime.domain.job_index import plain_run, plain_runs_indexed, unindexed_slots
from duetime.domain.keys import ExecutionKey, parse_execution_id
from duetime.domain.models import (
    RESULT_UNKNOWN,
    CatchUp,
    Delivery,
    Execution,
    ExecutionStatus,
    Job,
    JobStatus,
    Overlap,
    format_time,
    to_ms,
)
from duetime.domain.recurrence import SCHEDULE_EDITED, is_slot, recurrence_of
from duetime.domain.results import ResultRejected, check_fits_row, encode_result, truncate_error
from duetime.domain.retry import compute_backoff, should_retry
from duetime.domain.spread import spread, spread_due
from duetime.service import lateness, limits
from duetime.service.context import Ports
from duetime.service.events import run_ended
from duetime.service.job_ends import announce, complete_if_last, one_off_ending, pause_if_failing, settle_ended
from duetime.service.outcomes import ClaimVerdict, RunResult
from duetime.service.ports import DueMessage, JobEnding

log = logging.getLogger("duetime.executions")

# The skip reason of an at-most-once run found waiting after an earlier attempt: it might have been started.
STARTED_BEFORE = "at-most-once: started before"
# A message passed on by a worker that cannot run its handler is hidden this long, for another to take it.
PASS_HIDE_SECONDS = 1
# A run waiting its turn looks again after a third of a lease, and no sooner than this: SQS delays are whole
# seconds sent a second early (adapters/aws/queue.py), so a shorter wait would come back at once.
TURN_WAIT_SECONDS = 2
# A paused one-off's (or bounded schedule's) message whose run's lease has lapsed looks again this often, until
# that run ends (its holder was slow) or the job is resumed or cancelled (its holder was lost): the wait is a
# message's delay, at most SQS's 900 s.
PAUSED_RUN_WAIT_SECONDS = 300


@dataclass(frozen=True)
class Claim:
    verdict: ClaimVerdict
    execution: Execution | None = None
    job: Job | None = None
    hide_seconds: int = 0
    # The concurrency slots the claimed run holds (service/limits.py), given back when it ends.
    slots: tuple[str, ...] = ()
    slot_holder: str = ""
    # LIMITED and BUSY: the message to send again, for when the run should look again.
    deferred: DueMessage | None = None


def lease_seconds(ports: Ports, job_class: str) -> int:
    return ports.settings.job_class(job_class).lease_seconds


def claim_execution(
    ports: Ports,
    message: DueMessage,
    worker_id: str,
    lease_until: datetime | None = None,
    can_run: Callable[[Job], bool] | None = None,
    job: Job | None = None,
) -> Claim:
    """Claim the row a message points at, as docs/lifecycle.md's claim step says.

    Checks the job first (a paused or cancelled job's message is not run; one whose handler `can_run`
    refuses is passed on untouched), then makes the one conditional write; on success applies the job's
    overlap policy against its other running executions. The lease ends at `lease_until` (the worker
    passes the end of the message's visibility, so both end together), by default one lease from now.
    `job` is the message's job as the caller read it just before (a receive's jobs read together), else it
    is read here.
    """
    now = ports.clock()
    if job is None or job.job_id != message.job_id:
        job = ports.store.get_job(message.job_id)
    if job is None or job.status == JobStatus.CANCELLED:
        ports.store.end_waiting(message.key, ExecutionStatus.CANCELLED, now, "job cancelled")
        return Claim(ClaimVerdict.DONE)
    if job.status == JobStatus.PAUSED:
        if job.schedule.at is not None or job.schedule.is_bounded:
            # A message of an ended run comes again only when its end died part way: one read, on this rare path.
            row = ports.store.get_execution(message.key)
            if row is not None and row.status.is_terminal:
                settle_ended(ports, job, row, now)
                return Claim(ClaimVerdict.DONE, execution=row, job=job)
            if row is not None and row.status == ExecutionStatus.RUNNING:
                # Its run is under way, or its holder is slow or lost: this may be the run's last message, which
                # its end counts on should the job's completion after the run's own write fail (the message
                # comes again and settles it, above). Not dropped as a waiting run's is: it waits its turn, a
                # copy looking again after a lease, or after PAUSED_RUN_WAIT_SECONDS once the lease has lapsed
                # (simulation seed 1213: the end's read of the job failed, the job stayed paused for good).
                lease = lease_seconds(ports, message.job_class)
                wait = lease if row.lease_live(now) else max(lease, PAUSED_RUN_WAIT_SECONDS)
                return _looks_again(job, message, now, min(wait, SQS_MAX_DELAY_SECONDS))
        return Claim(ClaimVerdict.HELD, job=job)
    if can_run is not None and not can_run(job):
        return Claim(ClaimVerdict.PASSED, job=job, hide_seconds=PASS_HIDE_SECONDS)
    if _past_starting_deadline(job, message, now):
        ending = one_off_ending(ports, job, message.kind, now)
        ended = ports.store.end_waiting(message.key, ExecutionStatus.SKIPPED, now, "starting deadline", ending=ending)
        if ended is not None:
            run_ended(ports, ended, job)
            job = announce(ports, ending) or job
            complete_if_last(ports, job, ended, now)
            return Claim(ClaimVerdict.DONE, execution=ended, job=job)
    if _planned_before_an_edit(job, message):
        ended = ports.store.end_waiting(message.key, ExecutionStatus.SKIPPED, now, SCHEDULE_EDITED)
        if ended is not None:
            return Claim(ClaimVerdict.DONE, execution=ended, job=job)
    skip_reason = _skipped_by_catch_up(job, message, now)
    if skip_reason is not None:
        ended = ports.store.end_waiting(message.key, ExecutionStatus.SKIPPED, now, skip_reason)
        if ended is not None:
            run_ended(ports, ended, job)
            complete_if_last(ports, job, ended, now)
            return Claim(ClaimVerdict.DONE, execution=ended, job=job)
    lease = lease_seconds(ports, message.job_class)
    checks_overlap = job.overlap != Overlap.ALLOW and job.schedule.is_recurring
    if checks_overlap and message.kind == "catchup" and _live_others(ports, job, message.execution_id, now):
        # Catch-up runs of one job go one after another: wait for the running one, never skip.
        return _waits_its_turn(job, message, now, lease)
    # The retry budget counts from the row's retryBase (carried on its message, so the claim reads nothing more).
    max_attempts = job.retry.max_attempts + message.retry_base
    if message.kind == "backfill" and message.overlap == Overlap.FORBID and _backfill_waits(ports, job, message, now):
        return _waits_its_turn(job, message, now, lease)
    # The claim's own instant, read again after the reads above (tens of ms on moto): the row's startedAt is
    # when the claim is written, so a serial run never shows a start before the end of the run it waited for.
    now = ports.clock()
    lease_ends = lease_until or now + timedelta(seconds=lease)
    if limits.is_limited(job):  # before the claim, so a run held back spends no attempt
        admission = limits.admit(ports, job, message, to_ms(lease_ends))
        if admission.deferred is not None:
            return Claim(ClaimVerdict.LIMITED, job=job, deferred=admission.deferred)
        claim = _claim(ports, message, job, worker_id, now, lease_ends, max_attempts, checks_overlap)
        if claim.verdict != ClaimVerdict.CLAIMED or claim.execution is None:
            limits.release_slots(ports, admission.slots, admission.holder)
            return claim
        waited = limits.record_wait(ports, message.key, claim.execution, message)
        return replace(claim, execution=waited, slots=admission.slots, slot_holder=admission.holder)
    return _claim(ports, message, job, worker_id, now, lease_ends, max_attempts, checks_overlap)


def _claim(
    ports: Ports,
    message: DueMessage,
    job: Job,
    worker_id: str,
    now: datetime,
    lease_ends: datetime,
    max_attempts: int,
    checks_overlap: bool,
) -> Claim:
    """The claim's conditional write and what follows it (a lost last attempt, the overlap policy)."""
    at_most_once = job.delivery == Delivery.AT_MOST_ONCE
    outcome = ports.store.claim(
        message.key,
        worker_id,
        now,
        lease_ends,
        max_attempts,
        first_only=at_most_once,
        index_by_job=plain_runs_indexed(job),
    )
    if outcome.claimed is None:
        current = outcome.current
        if current is not None and current.lease_live(now):
            # A duplicate (SQS delivers at least once; the reconciler resends): the holder has its own
            # message, tied to its lease. Hiding this one until the lease ends would bring it back again
            # and again until SQS redrove it to the DLQ. If the holder is lost, its own message returns
            # when the lease ends, and the reconciler resends a running row whose lease ended long ago.
            return Claim(ClaimVerdict.DONE, execution=current, job=job)
        if at_most_once and current is not None:
            return _never_again(ports, message, job, current, now)
        if current is not None and current.status == ExecutionStatus.RUNNING:
            # The last attempt's worker was lost (its lease ended) and no attempt is left: fail it for good.
            error = f"attempt {current.attempt}'s worker stopped heartbeating and no attempt is left"
            with contextlib.suppress(Conflict):
                ending = one_off_ending(ports, job, current.kind, now)
                failed = ports.store.finish(
                    message.key, current.attempt, ExecutionStatus.FAILED, now, error=error, ending=ending
                )
                ports.queues.dead_letter(failed.job_class, failure_notice(ports, failed, job))
                run_ended(ports, failed, job)
                ended_for_good(ports, announce(ports, ending) or job, failed, now)
                return Claim(ClaimVerdict.DONE, execution=failed, job=job)
        if current is not None:
            settle_ended(ports, job, current, now)  # an ended run's end that died part way (no read: the claim's row)
        return Claim(ClaimVerdict.DONE, execution=current, job=job)
    claimed = outcome.claimed
    if checks_overlap and claimed.attempt == 1 and message.kind == "scheduled":
        others = _live_others(ports, job, claimed.execution_id, now)
        if others and job.overlap == Overlap.FORBID:
            skipped = ports.store.end_claimed(
                message.key, claimed.attempt, ExecutionStatus.SKIPPED, now, "overlap", claimed.claim_token
            )
            run_ended(ports, skipped, job)
            complete_if_last(ports, job, skipped, now)
            return Claim(ClaimVerdict.DONE, execution=skipped, job=job)
        for other in others:  # Overlap.REPLACE: end the old run; its next heartbeat is refused and it stops
            with contextlib.suppress(Conflict):
                replaced = ports.store.end_claimed(
                    ports.store.key_of(other), other.attempt, ExecutionStatus.CANCELLED, now, "replaced"
                )
                run_ended(ports, replaced, job)
                # The run replaced may hold a bounded schedule's last slot (runs late after an outage replace
                # one another in any order): nothing else would complete the job then (simulation seed 180,
                # --bounded).
                complete_if_last(ports, job, replaced, now)
    if job.late_after_seconds is not None:
        try:
            lateness.judge_start(ports, job, claimed)
        except Exception:  # the run is claimed: it must run whatever becomes of its lateness count
            log.exception("judging the lateness of %s failed", claimed.execution_id)
    return Claim(ClaimVerdict.CLAIMED, execution=claimed, job=job)


def _never_again(ports: Ports, message: DueMessage, job: Job, current: Execution, now: datetime) -> Claim:
    """An at-most-once run the claim did not take: a slot is never started a second time. A run whose
    worker was lost (its lease ended) ends `failed` with its attempt's outcome `unknown` (it may or may not
    have done its work), and its owner is told; a waiting run that some attempt claimed before (a retry
    planned before the job became at-most-once) is skipped: it might have been started. Anything else
    (ended already) is left as it is."""
    if current.status == ExecutionStatus.RUNNING:
        error = (
            f"result unknown: attempt {current.attempt}'s worker stopped heartbeating, and an at-most-once "
            "run is never started again"
        )
        with contextlib.suppress(Conflict):
            ending = one_off_ending(ports, job, current.kind, now)
            lost = ports.store.finish(
                message.key,
                current.attempt,
                ExecutionStatus.FAILED,
                now,
                error=error,
                ending=ending,
                outcome=RESULT_UNKNOWN,
            )
            ports.queues.dead_letter(lost.job_class, failure_notice(ports, lost, job))
            run_ended(ports, lost, job)
            ended_for_good(ports, announce(ports, ending) or job, lost, now)
            return Claim(ClaimVerdict.DONE, execution=lost, job=job)
    elif current.status == ExecutionStatus.SCHEDULED and current.attempt > 0:
        ending = one_off_ending(ports, job, current.kind, now)
        skipped = ports.store.end_waiting(message.key, ExecutionStatus.SKIPPED, now, STARTED_BEFORE, ending=ending)
        if skipped is not None:
            run_ended(ports, skipped, job)
            job = announce(ports, ending) or job
            complete_if_last(ports, job, skipped, now)
            return Claim(ClaimVerdict.DONE, execution=skipped, job=job)
    return Claim(ClaimVerdict.DONE, execution=current, job=job)


def _waits_its_turn(job: Job, message: DueMessage, now: datetime, lease: int) -> Claim:
    """BUSY: the run waits for its job's running one. The worker sends `deferred`, a fresh copy visible when
    the run should look again, and deletes what it received (as for a LIMITED run): however long the wait,
    no message of it is received more than once or twice, so none reaches the queue's maxReceiveCount and the
    DLQ drain never fails a run that was only waiting."""
    return _looks_again(job, message, now, max(TURN_WAIT_SECONDS, lease // 3))


def _looks_again(job: Job, message: DueMessage, now: datetime, wait: int) -> Claim:
    """BUSY: the message is sent again to be received `wait` seconds from now, and what was received goes."""
    deferred = replace(message, not_before_ms=to_ms(now) + wait * 1000)
    return Claim(ClaimVerdict.BUSY, job=job, hide_seconds=wait, deferred=deferred)


def _past_starting_deadline(job: Job, message: DueMessage, now: datetime) -> bool:
    """A first attempt that would start more than startingDeadlineSeconds after its slot is skipped (a
    retry is not: its due time moved on purpose)."""
    if job.starting_deadline_seconds is None or message.kind in ("manual", "backfill"):
        return False
    slot = message.slot
    due = spread_due(job.job_id, slot, job.jitter_seconds)  # a first attempt is due at its slot's spread
    first_attempt = message.due_ms == to_ms(due)
    return first_attempt and (now - due).total_seconds() > job.starting_deadline_seconds


def _planned_before_an_edit(job: Job, message: DueMessage) -> bool:
    """Whether this first attempt is of a slot the job's schedule no longer has: a pre-loader that read the
    job just before an edit planned and sent it. No I/O (the job is read anyway); a retry is never judged so
    (its due time moved on purpose), nor a run-now, backfill or catch-up run."""
    schedule = recurrence_of(job.schedule, job.created_at)
    if message.kind != "scheduled" or schedule is None:
        return False
    slot = message.slot
    first_attempt = message.due_ms == to_ms(spread_due(job.job_id, slot, job.jitter_seconds))
    return first_attempt and not is_slot(schedule, slot)


def _skipped_by_catch_up(job: Job, message: DueMessage, now: datetime) -> str | None:
    """Why a cron slot received this late must not run, by the job's catch-up policy; None if it runs.

    Catch-up is applied at dispatch, but a slot dispatched just before an outage (its message queued) is
    received only after it, already missed: the claim applies the same policy, so the slot is skipped
    unless the policy runs it (`all`; `latest` if no later slot has fallen due). A retry is never skipped:
    its due time moved on purpose. No I/O: the call counts of a claim do not change."""
    schedule = recurrence_of(job.schedule, job.created_at)
    if message.kind != "scheduled" or schedule is None or job.catch_up == CatchUp.ALL:
        return None
    slot = message.slot
    offset = spread(job.job_id, slot, job.jitter_seconds)
    if message.due_ms != to_ms(slot + offset):
        return None
    exclusions = Exclusions(job.exclude, job.schedule.time_zone) if job.exclude else None
    excluded = exclusions.excludes if exclusions is not None else None
    deadline = job.starting_deadline_seconds
    # endAt bounds the plan (maxRuns is counted on rows, which a message does not carry)
    plan = plan_catch_up(schedule, slot, now - offset, job.catch_up, deadline, excluded, job.schedule.end_at)
    return None if plan is None or slot in plan.run_slots else plan.skip_reason


# The rows of a job that may be running: those due by now plus this margin (definitions.py says why).
RUNNING_DUE_MARGIN = timedelta(seconds=RUNNING_DUE_MARGIN_SECONDS)


def _live_others(ports: Ports, job: Job, execution_id: str, now: datetime) -> list[Execution]:
    """The job's other executions running under a live lease: its other indexed open rows due by now (one Query
    of the index), and, on a store that leaves some out of it, the rows of the slots that may run without an entry
    yet, read by key (none for a run claimed on time of a job a minute or more apart: domain/job_index.py)."""
    others = ports.store.indexed_open_executions_of_job(
        job.job_id, due_by=now + RUNNING_DUE_MARGIN, excluding=execution_id
    )
    if not ports.store.indexes_every_open_run:
        seen = {e.execution_id for e in others}
        for slot in unindexed_slots(job, parse_execution_id(execution_id)[1], now):
            plain = plain_run(job, slot)
            if plain.execution_id not in seen and (row := ports.store.get_execution(ports.store.key_of(plain))):
                others.append(row)
    return [e for e in others if e.lease_live(now)]


def _backfill_waits(ports: Ports, job: Job, message: DueMessage, now: datetime) -> bool:
    """Whether a serial (`forbid`) backfilled run must wait: while another run of the job runs under a live
    lease, or while an earlier backfilled slot of it still waits. They run oldest first, so two workers
    receiving two of them at once never start both: the later one sees the earlier waiting or running.
    One read of the job's open rows, on backfilled runs only."""
    for other in ports.store.open_executions_of_job(job.job_id):
        if other.execution_id == message.execution_id:
            continue
        if other.lease_live(now):
            return True
        earlier_backfill = other.kind == "backfill" and other.overlap == Overlap.FORBID
        if earlier_backfill and other.status == ExecutionStatus.SCHEDULED and other.execution_id < message.execution_id:
            return True
    return False


def waits_its_turn(ports: Ports, job: Job, message: DueMessage, now: datetime) -> bool:
    """Whether the waiting run of `message` is one the claim would answer BUSY: a catch-up run behind its
    job's running one, or a serial backfilled run behind a running or earlier one (what the DLQ drain must
    not fail as poison, should a message of it ever be redriven)."""
    if message.kind == "catchup":
        return bool(_live_others(ports, job, message.execution_id, now))
    serial_backfill = message.kind == "backfill" and message.overlap == Overlap.FORBID
    return serial_backfill and _backfill_waits(ports, job, message, now)


def live_others(ports: Ports, job: Job, execution_id: str, now: datetime) -> list[Execution]:
    """The job's other executions running under a live lease (what a catch-up run waits for)."""
    return _live_others(ports, job, execution_id, now)


def heartbeat(
    ports: Ports,
    key: ExecutionKey,
    attempt: int,
    job_class: str | None = None,
    run_ends: datetime | None = None,
    claim_token: str | None = None,
) -> Execution:
    """Extend `attempt`'s lease by one lease of its job class from now (the row is read for the class only
    when the caller does not know it); raises StaleAttempt if that attempt no longer holds the row.

    `run_ends` (startedAt + the job's timeoutSeconds) caps the lease: a worker that keeps heartbeating
    cannot hold the row running past its timeout, and once that time has come the heartbeat is refused.
    `claim_token` (the claim's secret, known to its holder only) is checked in the same conditional write."""
    if job_class is None:
        execution = ports.store.get_execution(key)
        job_class = execution.job_class if execution else DEFAULT_JOB_CLASS
    return ports.store.heartbeat(key, attempt, lease_end(ports, job_class, run_ends), claim_token)


def lease_end(ports: Ports, job_class: str, run_ends: datetime | None = None) -> datetime:
    """Where a heartbeat from now moves the lease: one lease of `job_class`, never past `run_ends` (raises
    Conflict once that time has come)."""
    now = ports.clock()
    lease_until = now + timedelta(seconds=lease_seconds(ports, job_class))
    if run_ends is not None:
        if now >= run_ends:
            raise Conflict("the run has reached its job's timeoutSeconds", field="attempt")
        lease_until = min(lease_until, run_ends)
    return lease_until


def run_ends(execution: Execution, job: Job | None) -> datetime | None:
    """When `execution`'s current attempt must be over: its start plus its job's timeoutSeconds."""
    if execution.started_at is None or job is None:
        return None
    return execution.started_at + timedelta(seconds=job.timeout_seconds)


def check_holder(execution: Execution, attempt: int, worker_id: str, claim_token: str) -> None:
    """Refuse a worker-route write unless `worker_id` is the worker that claimed `attempt`, `claim_token` is
    that claim's secret and the attempt still runs the row (raises StaleAttempt, a 409, naming the field
    that does not match). This read gives the caller a precise error; what binds is the write that
    follows, conditional on the attempt and the token together, so a newer claim between this read and
    that write is refused there."""
    if execution.status != ExecutionStatus.RUNNING or execution.attempt != attempt:
        raise StaleAttempt(f"attempt {attempt} does not hold the execution", field="attempt")
    if execution.worker_id != worker_id:
        raise StaleAttempt(f"attempt {attempt} was claimed by another worker", field="workerId")
    if not hmac.compare_digest((execution.claim_token or "").encode(), claim_token.encode()):
        raise StaleAttempt(f"the claim token is not attempt {attempt}'s", field="claimToken")


def complete(
    ports: Ports,
    key: ExecutionKey,
    attempt: int,
    succeeded: bool,
    result: Any = None,
    error: str | None = None,
    retryable: bool = True,
    job: Job | None = None,
    current: Execution | None = None,
    claim_token: str | None = None,
) -> Execution:
    """Record the outcome of `attempt`, fenced by it and by `claim_token` when given (raises StaleAttempt if
    it no longer holds).

    A retryable failure with attempts left moves the row to now + full-jitter backoff (and sends it at
    once if due within the dispatch horizon); otherwise the execution ends `failed` and goes to the DLQ.
    `job` and `current` (the row as the caller last read it) save reading them again; the writes are
    fenced by the attempt whatever the caller read.

    A result that is not JSON or larger than MAX_RESULT_BYTES cannot be stored: the attempt fails
    permanently with that reason instead (running it again would give the same result). Error text is
    truncated to MAX_ERROR_BYTES on every path.
    """
    now = ports.clock()
    # Both are read once, before the outcome's write: a one-off job's run completes its job in that very write,
    # and a result must fit beside the row's payload. A worker passes both (it read them to claim), so the hot
    # path reads nothing here.
    current = current or ports.store.get_execution(key)
    if job is None and current is not None:
        job = ports.store.get_job(current.job_id)
    if succeeded:
        try:
            success = Success.of(ports, key, attempt, result, job, current, claim_token, now)
        except ResultRejected as exc:
            error, retryable = str(exc), False
        else:
            succeeded_row = success.write()
            success.after(succeeded_row)
            return succeeded_row
    error = None if error is None else truncate_error(error)
    if current is None or current.status != ExecutionStatus.RUNNING or current.attempt != attempt:
        # Let the fenced write refuse it with the usual error.
        return ports.store.finish(key, attempt, ExecutionStatus.FAILED, now, error=error, claim_token=claim_token)
    runnable = (JobStatus.ACTIVE, JobStatus.COMPLETED)  # a completed job's last run still retries
    # An at-most-once job never retries: a reported failure was a start, and a retry would be a second one.
    retries = job is not None and job.delivery == Delivery.AT_LEAST_ONCE and job.status in runnable
    if job is not None and retries and should_retry(job.retry, attempt, retryable, current.retry_base):
        return _retry(ports, key, current, attempt, error, now, job, claim_token)
    ending = one_off_ending(ports, job, current.kind, now)
    failed = ports.store.finish(
        key, attempt, ExecutionStatus.FAILED, now, error=error, claim_token=claim_token, ending=ending
    )
    # A crash here loses no notice: the row stays in the open index until the DLQ drain has told the
    # owner, and the reconciler sends the notice again if it never got there.
    ports.queues.dead_letter(failed.job_class, failure_notice(ports, failed, job))
    run_ended(ports, failed, job)
    ended_for_good(ports, announce(ports, ending) or job, failed, now)
    return failed


@dataclass
class Success:
    """A run's success made ready to store: its result encoded and checked against the row, and its job's
    ending decided. `write` is the one fenced write; `after` is what follows once it is stored (its events, a
    bounded schedule's end). Split so a worker storing several runs' ends in one transaction does the rest
    before and after it: on SQLite that transaction holds the file's write lock, which a second worker
    process waits for."""

    ports: Ports
    key: ExecutionKey
    attempt: int
    result: Any
    job: Job | None
    ending: JobEnding | None
    claim_token: str | None
    now: datetime

    @classmethod
    def of(
        cls,
        ports: Ports,
        key: ExecutionKey,
        attempt: int,
        result: Any,
        job: Job | None,
        current: Execution | None,
        claim_token: str | None,
        now: datetime | None = None,
    ) -> Success:
        """Raises ResultRejected if the result cannot be stored (not JSON, too large, or too large beside
        the row's payload: a write that went through would fail at the table, and on moto left a succeeded
        row without its result)."""
        text = encode_result(result)
        if current is not None:
            check_fits_row(text, current)
        now = now or ports.clock()
        ending = one_off_ending(ports, job, current.kind if current else None, now)
        return cls(ports, key, attempt, result, job, ending, claim_token, now)

    def write(self) -> Execution:
        """Store the success, fenced by the attempt and claim token; raises StaleAttempt if it no longer holds."""
        return self.ports.store.finish(
            self.key,
            self.attempt,
            ExecutionStatus.SUCCEEDED,
            self.now,
            result=self.result,
            claim_token=self.claim_token,
            ending=self.ending,
        )

    def after(self, row: Execution) -> None:
        """What follows the stored success `row`."""
        run_ended(self.ports, row, self.job)
        announce(self.ports, self.ending)
        if row.run_number is not None:  # a bounded schedule's run: was it the last?
            complete_if_last(self.ports, self.job, row, self.now)


def ended_for_good(ports: Ports, job: Job | None, failed: Execution, now: datetime) -> None:
    """What a run that failed for good does to its job: a pause after pauseAfterFailures failures in a
    row, else the completion of a bounded schedule whose last run it was (a one-off job was completed in
    the run's own write: it has nothing left to pause)."""
    if not pause_if_failing(ports, job, failed, now):
        complete_if_last(ports, job, failed, now)


def failure_notice(ports: Ports, execution: Execution, job: Job | None) -> dict[str, Any]:
    """The DLQ message for an execution that failed for good: what its owner is told, and where the row
    is, so the drain can record that the owner was told."""
    key = ports.store.key_of(execution)
    return {
        "kind": "failed",
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "owner": job.owner if job else None,
        "jobName": job.name if job else None,
        "attempt": execution.attempt,
        "error": execution.error,
        "finishedAt": format_time(execution.finished_at) if execution.finished_at else None,
        "pk": key.pk,
        "sk": key.sk,
        # Where the owner hears of it (the notifier delivers there): carried here, so the drain reads nothing.
        "notify": job.notify.in_notice() if job and job.notify else None,
        "ownerGroups": list(job.owner_groups) if job else [],  # for the destinations' grants
    }


def _retry(
    ports: Ports,
    key: ExecutionKey,
    current: Execution,
    attempt: int,
    error: str | None,
    now: datetime,
    job: Job,
    claim_token: str | None,
) -> Execution:
    delay = compute_backoff(job.retry, attempt - current.retry_base, ports.uniform)
    due = now + timedelta(seconds=delay)
    history = list(current.attempts)
    if history:
        history[-1] = history[-1].model_copy(update={"finished_at": now, "outcome": "failed", "error": error})
    moved = current.model_copy(
        update={
            "due_at": due,
            "status": ExecutionStatus.SCHEDULED,
            "lease_until": None,
            "worker_id": None,
            "claim_token": None,
            "error": error,
            "attempts": history,
        }
    )
    new_key = ports.store.key_of(moved)
    # Send before the move: a message for a row that never moved is deleted at claim, while a moved
    # row whose message was never sent would wait for the reconciler.
    if due <= ports.dispatch_horizon(now):
        ports.queues.send([DueMessage.for_execution(moved, new_key)], now)
    ports.store.move_for_retry(key, attempt, moved, claim_token)
    return moved


def release(ports: Ports, key: ExecutionKey, attempt: int, claim_token: str | None = None) -> bool:
    """End `attempt`'s lease now (clean shutdown), so the next worker may claim it at once."""
    return ports.store.release(key, attempt, ports.clock(), claim_token)


class Lease:
    """A claimed attempt's hold on its row and on its due message, kept together: the row's lease and the
    message's visibility are extended as one and released as one, so a dead worker's message reappears just
    as its lease ends and never while a live worker holds the row."""

    def __init__(self, ports: Ports, key: ExecutionKey, execution: Execution, job_class: str, receipt: str) -> None:
        """`job_class` names the queue the message (`receipt`) was received from."""
        self.ports = ports
        self.key = key
        self.execution = execution
        self.job_class = job_class
        self.receipt = receipt
        self.seconds = lease_seconds(ports, job_class)

    @property
    def attempt(self) -> int:
        return self.execution.attempt

    def hide_message(self) -> None:
        """Hide the message for one lease from now (at claim, when its visibility does not end with the lease)."""
        self.ports.queues.hold(self.job_class, self.receipt, self.seconds)

    def extend(self) -> Execution:
        """Renew the row's lease (a fenced heartbeat; raises StaleAttempt if the attempt no longer holds it),
        then the message's visibility by as long."""
        updated = heartbeat(self.ports, self.key, self.attempt, self.job_class, claim_token=self.execution.claim_token)
        self.hide_message()
        return updated

    def release(self) -> bool:
        """End the row's lease now and make the message visible at once, so another worker takes the run
        over without waiting (clean shutdown); False if the attempt no longer held the row."""
        if not release(self.ports, self.key, self.attempt, self.execution.claim_token):
            return False
        self.ports.queues.extend(self.job_class, self.receipt, 0)
        return True

    def complete(self, outcome: RunResult, job: Job | None = None) -> Execution:
        """Record the run's outcome, fenced by the attempt (raises StaleAttempt if it no longer holds)."""
        return complete(
            self.ports,
            self.key,
            self.attempt,
            succeeded=outcome.succeeded,
            result=outcome.result,
            error=outcome.error,
            retryable=outcome.retryable,
            job=job,
            current=self.execution,
            claim_token=self.execution.claim_token,
        )

    def success(self, outcome: RunResult, job: Job | None = None) -> Success | None:
        """The run's success made ready to store in a batch (see Success), or None when `complete` must store
        the outcome itself: a failure, or a result that cannot be stored."""
        if not outcome.succeeded:
            return None
        try:
            return Success.of(
                self.ports, self.key, self.attempt, outcome.result, job, self.execution, self.execution.claim_token
            )
        except ResultRejected:
            return None

    def record_checkpoint(self, checkpoint: str, with_heartbeat: bool = False) -> Execution:
        """Record the handler's checkpoint (compact JSON text) in one fenced write; `with_heartbeat`, that
        write renews the lease too, and the message's visibility follows as extend() does. The row as
        written becomes this lease's, so a retry moves the checkpoint with it. Raises StaleAttempt."""
        lease_until = lease_end(self.ports, self.job_class) if with_heartbeat else None
        updated = self.ports.store.record_checkpoint(
            self.key, self.attempt, checkpoint, self.ports.clock(), self.execution.claim_token, lease_until
        )
        self.execution = self.execution.model_copy(update={"checkpoint": updated.checkpoint})
        if with_heartbeat:
            self.hide_message()
        return updated


def find_execution(ports: Ports, execution_id: str) -> Execution:
    """An execution by id (worker-facing routes know only the id); raises NotFound."""
    job_id, _ = parse_execution_id(execution_id)
    execution = ports.store.find_execution(job_id, execution_id)
    if execution is None:
        raise NotFound(f"execution {execution_id!r} not found", field="executionId")
    return execution


def report_heartbeat(ports: Ports, execution_id: str, attempt: int, worker_id: str, claim_token: str) -> Execution:
    """A worker's heartbeat for the attempt it holds, by execution id (the API's worker route): the lease
    is extended, never past the run's timeout. Raises NotFound, StaleAttempt (not the holder) or Conflict."""
    execution = find_execution(ports, execution_id)
    check_holder(execution, attempt, worker_id, claim_token)
    key = ports.store.key_of(execution)
    job = ports.store.get_job(execution.job_id)
    return heartbeat(ports, key, attempt, execution.job_class, run_ends(execution, job), claim_token)


def report_outcome(
    ports: Ports,
    execution_id: str,
    attempt: int,
    worker_id: str,
    claim_token: str,
    succeeded: bool,
    result: Any = None,
    error: str | None = None,
    retryable: bool = True,
) -> Execution:
    """A worker's outcome for the attempt it holds, by execution id (the API's worker route), recorded as
    `complete` does, fenced by the attempt and its claim token in the store's conditional write. Raises
    NotFound or StaleAttempt (not the holder)."""
    execution = find_execution(ports, execution_id)
    check_holder(execution, attempt, worker_id, claim_token)
    return complete(
        ports,
        ports.store.key_of(execution),
        attempt,
        succeeded=succeeded,
        result=result,
        error=error,
        retryable=retryable,
        current=execution,
        claim_token=claim_token,
    )


def lateness_ms(execution: Execution) -> int:
    """How late this attempt started against the time it was due."""
    if execution.started_at is None:
        return 0
    late = to_ms(execution.started_at) - to_ms(execution.due_at)
    if not execution.waited_for_limit_ms:
        return late
    # The wait for a rate limit or concurrency cap is the owner's choice, not the scheduler's lateness. It is
    # the execution's total: a retry's attempt, due later, may have waited less (never below zero then).
    return max(0, late - execution.waited_for_limit_ms)
