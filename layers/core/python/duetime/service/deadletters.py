"""The dead-letter path: record what reached a DLQ and tell the job's owner."""

from __future__ import annotations

import json
from typing import Any

from duetime.domain.errors import Conflict
from duetime.domain.models import ExecutionStatus
from duetime.queue.sqs import DueMessage
from duetime.service.context import Ports


def drain_dead_letters(ports: Ports, job_class: str) -> int:
    """Handle every message on `job_class`'s DLQ once; returns how many were handled.

    A failed execution's notice goes to its owner. A due message that SQS redrove there (received too
    often without completing: a poison job) first ends its execution `failed`, so none is left waiting.
    """
    handled = 0
    while True:
        batch = ports.queues.receive_dead_letters(job_class)
        if not batch:
            return handled
        for body, receipt in batch:
            notice = body if body.get("kind") == "failed" else _fail_redriven(ports, body)
            if notice:
                owner = str(notice.get("owner") or "unknown")
                ports.notifier.notify(owner, f"duetime: execution {notice.get('executionId')} failed", notice)
            ports.queues.delete_dead_letter(job_class, receipt)
            handled += 1


def _fail_redriven(ports: Ports, body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        message = DueMessage.from_body(json.dumps(body))
    except (KeyError, ValueError, TypeError):
        return {"kind": "unreadable", "body": body}
    now = ports.clock()
    execution = ports.store.get_execution(message.key)
    reason = "poison message: received too many times without completing"
    if execution is None:
        return None
    if execution.status.is_terminal:
        # Ended by this path already: a notifier that died before telling the owner tells them now.
        if execution.status != ExecutionStatus.FAILED or reason not in (execution.skip_reason, execution.error):
            return None
    else:
        try:
            if execution.status == ExecutionStatus.SCHEDULED:
                ports.store.end_waiting(message.key, ExecutionStatus.FAILED, now, reason)
            else:
                ports.store.finish(message.key, execution.attempt, ExecutionStatus.FAILED, now, error=reason)
        except Conflict:
            return None
    job = ports.store.get_job(message.job_id)
    return {
        "kind": "failed",
        "executionId": message.execution_id,
        "jobId": message.job_id,
        "owner": job.owner if job else None,
        "error": reason,
    }
