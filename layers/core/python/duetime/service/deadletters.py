"""The dead-letter path: record what reached a DLQ and tell the job's owner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from duetime.domain.errors import Conflict
from duetime.domain.keys import ExecutionKey
from duetime.domain.models import RESULT_UNKNOWN, Delivery, ExecutionStatus
from duetime.service.context import Ports
from duetime.service.events import run_ended
from duetime.service.executions import failure_notice, waits_its_turn
from duetime.service.job_ends import announce, one_off_ending
from duetime.service.ports import DueMessage

POISON = "poison message: received too many times without completing"


def drain_dead_letters(ports: Ports, job_class: str, time_for_one_more: Callable[[], bool] | None = None) -> int:
    """Handle every message on `job_class`'s DLQ once; returns how many were handled. With `time_for_one_more`,
    stop before a message there may not be the time to finish (the DLQ notifier's invocation ends at its
    timeout: killed mid-batch, it would tell again what it had told): what is left waits for the next drain.

    A failed execution's notice goes to its owner, and the row records that the owner was told (it leaves
    the open index). A due message that SQS redrove there (received too often without completing: a
    poison job) first ends its execution `failed`, so none is left waiting. Notices are at least once: a
    drain that dies between telling and recording tells again.
    """
    more = time_for_one_more or (lambda: True)
    handled = 0
    while more():
        batch = ports.queues.receive_dead_letters(job_class)
        if not batch:
            return handled
        for body, receipt in batch:
            if not more():  # the rest of the batch is received again after the DLQ's visibility timeout
                return handled
            if body.get("kind") in ("paused", "late"):  # a job paused after failures in a row (service.job_ends),
                # or a run past its job's lateness budget (service.lateness)
                job_name = body.get("jobName") or body.get("jobId")
                subject = (
                    f"duetime: job {job_name} paused"
                    if body["kind"] == "paused"
                    else f"duetime: execution {body.get('executionId')} of job {job_name} is late"
                )
                ports.notifier.notify(str(body.get("owner") or "unknown"), subject, body)
                ports.queues.delete_dead_letter(job_class, receipt)
                handled += 1
                continue
            notice = body if body.get("kind") == "failed" else _fail_redriven(ports, body)
            if notice:
                owner = str(notice.get("owner") or "unknown")
                ports.notifier.notify(owner, f"duetime: execution {notice.get('executionId')} failed", notice)
                if notice.get("pk") and notice.get("sk"):
                    # The row stays, with its error, and enters its owner's dead letters (GET /dead-letters).
                    key = ExecutionKey(pk=notice["pk"], sk=notice["sk"])
                    ports.store.mark_notified(key, ports.clock(), notice.get("owner"))
            ports.queues.delete_dead_letter(job_class, receipt)
            handled += 1
    return handled


def _fail_redriven(ports: Ports, body: dict[str, Any]) -> dict[str, Any] | None:
    """End a poison message's execution `failed` (if it has not ended) and return its notice. One that
    ended already has its notice from wherever it ended (or from the reconciler)."""
    try:
        message = DueMessage.from_fields(body)
    except (KeyError, ValueError, TypeError):
        return {"kind": "unreadable", "body": body}
    now = ports.clock()
    execution = ports.store.get_execution(message.key)
    if execution is None or execution.status.is_terminal or execution.lease_live(now):
        # Ended already, or running under a live lease (a duplicate redriven while its run goes on):
        # the run ends on its own; if its worker is lost, the reconciler resends it after the lease.
        return None
    job = ports.store.get_job(message.job_id)
    waiting = execution.status == ExecutionStatus.SCHEDULED
    if waiting and job is not None and waits_its_turn(ports, job, message, now):
        # A run waiting its turn (a catch-up run behind its job's running one, a serial backfilled slot) is
        # not poison: each wait sends a fresh message, and one redriven all the same (sent before that rule)
        # stays waiting in the `open` index, where the reconciler finds it overdue and sends it again.
        return None
    ending = one_off_ending(ports, job, execution.kind, now)
    try:
        if execution.status == ExecutionStatus.SCHEDULED:
            ended = ports.store.end_waiting(message.key, ExecutionStatus.FAILED, now, POISON, ending=ending)
        else:
            # An at-most-once run's lost attempt may have done its work: its outcome is unknown.
            unknown = job is not None and job.delivery == Delivery.AT_MOST_ONCE
            ended = ports.store.finish(
                message.key,
                execution.attempt,
                ExecutionStatus.FAILED,
                now,
                error=POISON,
                ending=ending,
                outcome=RESULT_UNKNOWN if unknown else None,
            )
    except Conflict:
        return None
    if ended is None:
        return None
    run_ended(ports, ended, job)
    announce(ports, ending)
    return failure_notice(ports, ended, job)
