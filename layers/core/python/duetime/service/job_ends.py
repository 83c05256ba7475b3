"""What a run's end does to its job: a one-off job's run and a bounded schedule's last run complete it,
failures in a row pause it."""

from __future__ import annotations

import logging
from datetime import datetime

from duetime.domain.bounds import is_last_slot
from duetime.domain.errors import Conflict
from duetime.domain.events import JobChange
from duetime.domain.models import Execution, ExecutionStatus, Job, JobStatus
from duetime.domain.recurrence import recurrence_of
from duetime.service.context import Ports
from duetime.service.events import job_changed
from duetime.service.ports import JobEnding

log = logging.getLogger("duetime.job_ends")

# Statuses that end a run that ran (or was meant to): what "consecutive failed runs" looks through.
_RAN = (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED)
# How far auto-pause reads a job's history for its newest runs (newest_runs).
PAUSE_PAGE_SIZE = 50
PAUSE_PAGES = 25


# The note a one-off job carries once its one run has ended for good.
ONE_OFF_ENDED = "its one run ended"


def one_off_ending(ports: Ports, job: Job | None, run_kind: str | None, now: datetime) -> JobEnding | None:
    """The completion of a one-off job to write together with the end for good of a run of `run_kind`, if
    that is its one run (succeeded, failed after its last attempt, skipped by its deadline, failed as
    poison); None for any other run (a run-now, a repeating schedule's) or a job already ended. Written in
    the run's own write, it gives the job's place in its owner's active-jobs quota back at most once.

    A paused job's held rows go back where the reconciler looks first (release_held)."""
    if job is None or job.schedule.at is None or run_kind != "scheduled":
        return None
    if job.status not in (JobStatus.ACTIVE, JobStatus.PAUSED):
        return None
    release_held(ports, job)
    return JobEnding(job, now, note=ONE_OFF_ENDED)


def release_held(ports: Ports, job: Job) -> list[Execution]:
    """A paused job's waiting rows, each given back to the reconciler's `open` index (the pause held them out of
    it), earliest due first; none for a job that is not paused. Resume, cancel and a completion call it before
    the job's own write, so a write refused or a process dying in between leaves a paused job whose rows the
    reconciler holds again, never rows waiting out of sight for good.

    A completion needs it too: a completed job is never resumed (the simulation found a one-off paused while its
    run ran, seed 4162 with --edits --run-now --backfill --spread). Known only from `job` as the caller read it:
    a run's end that read the job before a pause learns of it from its write (announce)."""
    if job.status != JobStatus.PAUSED:
        return []
    held = sorted(
        (e for e in ports.store.open_executions_of_job(job.job_id) if e.status == ExecutionStatus.SCHEDULED),
        key=lambda e: e.due_at,
    )
    for execution in held:
        ports.store.unhold_waiting(ports.store.key_of(execution))
    return held


def one_off_reopening(job: Job, execution: Execution, now: datetime) -> JobEnding | None:
    """The reopening of a completed one-off job whose one run, failed, is retried: active again (taking its
    place in the quota back) until that run ends; None for any other retry."""
    if job.schedule.at is None or execution.kind != "scheduled" or job.status != JobStatus.COMPLETED:
        return None
    return JobEnding(job, now, reopen=True)


def announce(ports: Ports, ending: JobEnding | None) -> Job | None:
    """After the run's own write: publish the job change `ending` made, if the store applied it; returns the job
    as changed (None if nothing changed).

    A completion the store did not apply met the job in another status than its caller read (the worker reads
    it at the claim): ended or cancelled since (nothing to do), or paused or resumed since. Such a job is read
    again and completed as it stands, its held rows given back to the reconciler first (complete_schedule): a
    one-off job paused while its one run ran was left paused, its held rows out of sight for good (simulation
    seed 4162). One read, only on that rare path."""
    if ending is None:
        return None
    if ending.changed is None:
        return None if ending.reopen else _complete_as_stored(ports, ending)
    log.info("job %s %s", ending.changed.job_id, ending.changed.status.value)
    change = JobChange.REOPENED if ending.reopen else JobChange.COMPLETED
    job_changed(ports, ending.changed, change, ending.now)
    return ending.changed


def _complete_as_stored(ports: Ports, ending: JobEnding) -> Job | None:
    """The one-off job of `ending`, whose status changed since it was read, completed if it is still active or
    paused; None if it ended meanwhile."""
    stored = ports.store.get_job(ending.job.job_id)
    return None if stored is None else complete_schedule(ports, stored, ending.now, ending.note)


def complete_schedule(ports: Ports, job: Job, now: datetime, note: str | None = None) -> Job | None:
    """Mark a job whose schedule has run its last slot `completed` (once; a change meanwhile wins); returns the
    job as completed, None if it was not."""
    if job.status not in (JobStatus.ACTIVE, JobStatus.PAUSED):
        return None
    release_held(ports, job)
    try:
        reason = note or "the schedule's last run ended"
        completed = ports.store.update_job_status(job, JobStatus.COMPLETED, now, reason)
    except Conflict:
        return None
    job_changed(ports, completed, JobChange.COMPLETED, now)
    return completed


def complete_if_last(ports: Ports, job: Job | None, execution: Execution, now: datetime) -> None:
    """After `execution` ended for good: complete its job if it held the bounded schedule's last slot.

    Pure arithmetic on the job and the row (no read); only the last run pays the one job write."""
    if job is not None and is_last_slot(job, execution, recurrence_of(job.schedule, job.created_at)):
        complete_schedule(ports, job, now)


def settle_ended(ports: Ports, job: Job, row: Execution, now: datetime) -> None:
    """What the end of `row`, found ended when its message came again, should have done to its job: complete a
    one-off job whose one run it was, or a bounded schedule whose last slot it held. The run's end does it in or
    right after its own write, so this finds work only when that end's process died (or its store call failed)
    after the write: the job stayed active or paused with nothing to run, for good (the simulation, seed 150
    with --limits: a one-off paused while its run ran, that run's end refused the completion as the job was no
    longer what it had read, and the end's caller failed before completing it as it stood). No read."""
    if not row.status.is_terminal or row.status == ExecutionStatus.CANCELLED:
        return
    if job.schedule.at is not None and row.kind == "scheduled":
        complete_schedule(ports, job, now, ONE_OFF_ENDED)
    elif row.run_number is not None:
        complete_if_last(ports, job, row, now)


def pause_if_failing(ports: Ports, job: Job | None, failed: Execution, now: datetime) -> bool:
    """After `failed` ended `failed` for good: pause the job (with a note) if its last pauseAfterFailures
    runs all failed. Reads the job's newest history rows only here, on a failure; a success costs nothing.
    Returns True if it paused the job."""
    if job is None or job.pause_after_failures is None or job.status != JobStatus.ACTIVE:
        return False
    wanted = job.pause_after_failures
    runs = newest_runs(ports, job.job_id, failed, wanted)
    if len(runs) < wanted or any(e.status != ExecutionStatus.FAILED for e in runs):
        return False
    note = f"paused after {wanted} consecutive failed runs (last: {failed.execution_id})"
    try:
        paused = ports.store.update_job_status(job, JobStatus.PAUSED, now, note)
    except Conflict:
        return False
    # As a pause by the owner does: held rows leave the reconciler's open index until resume.
    for execution in ports.store.open_executions_of_job(paused.job_id):
        if execution.status == ExecutionStatus.SCHEDULED:
            ports.store.hold_waiting(ports.store.key_of(execution))
    log.info("job %s %s", job.job_id, note)
    job_changed(ports, paused, JobChange.AUTO_PAUSED, now)
    # The owner hears of it where it hears of failures: through the DLQ notifier, as a failure is told.
    ports.queues.dead_letter(failed.job_class, auto_pause_notice(paused, failed))
    return True


def newest_runs(ports: Ports, job_id: str, failed: Execution, wanted: int) -> list[Execution]:
    """The job's newest `wanted` rows that ran (succeeded or failed), newest first, `failed` among them as it
    ended. Skipped, cancelled and still open rows are not runs and are looked through, page by page: a frequent
    schedule keeps rows of its coming slots newer than any run (pre-created, backfilled, run-now), more than a
    page of them at times. The pages stop at the first `wanted` runs, or after PAUSE_PAGES (open rows are bounded
    by the pre-load window and the backfill limit, so that is enough)."""
    runs: dict[str, Execution] = {failed.execution_id: failed}
    cursor: str | None = None
    for _ in range(PAUSE_PAGES):
        page = ports.store.list_executions(job_id, PAUSE_PAGE_SIZE, cursor, newest_first=True)
        for execution in page.items:
            if execution.status in _RAN and execution.execution_id != failed.execution_id:
                runs[execution.execution_id] = execution
        cursor = page.cursor
        seen_past_failed = not page.items or page.items[-1].execution_id <= failed.execution_id
        if cursor is None or (seen_past_failed and len(runs) >= wanted):
            break
    newest = sorted(runs.values(), key=lambda e: e.execution_id, reverse=True)[:wanted]
    return newest


def auto_pause_notice(job: Job, failed: Execution) -> dict[str, object]:
    """The DLQ message telling the owner that its job was paused after failures in a row."""
    return {
        "kind": "paused",
        "jobId": job.job_id,
        "owner": job.owner,
        "jobName": job.name,
        "executionId": failed.execution_id,
        "note": job.note,
        "notify": job.notify.in_notice() if job.notify else None,
        "ownerGroups": list(job.owner_groups),  # the notifier checks the destinations' grants with them
    }
