"""Checkpoints: a running attempt records its progress in its heartbeat's fenced write; the next attempt of
the same execution (a retry after a failure, a takeover after a lost worker, a manual retry) resumes from it."""

from __future__ import annotations

from typing import Any

from duetime.domain.checkpoints import encode_checkpoint
from duetime.domain.errors import NotFound
from duetime.domain.keys import parse_execution_id
from duetime.domain.models import Execution
from duetime.service.context import Ports
from duetime.service.executions import check_holder, find_execution, lease_end, run_ends


def report_checkpoint(
    ports: Ports, execution_id: str, attempt: int, worker_id: str, claim_token: str, state: Any
) -> Execution:
    """A worker's heartbeat carrying its checkpoint (the API's worker route): one conditional write renews
    the lease (never past the run's timeout) and records `state`, fenced by the attempt and its claim
    token. Raises CheckpointRejected (not JSON, too large), NotFound, StaleAttempt (not the holder: 409)
    or Conflict (the run reached its timeout)."""
    text = encode_checkpoint(state)
    execution = find_execution(ports, execution_id)
    check_holder(execution, attempt, worker_id, claim_token)
    until = lease_end(ports, execution.job_class, run_ends(execution, ports.store.get_job(execution.job_id)))
    key = ports.store.key_of(execution)
    return ports.store.record_checkpoint(key, attempt, text, ports.clock(), claim_token, until)


def get_owned_execution(ports: Ports, owner: str, execution_id: str) -> Execution:
    """One of the owner's executions, with its attempts and last checkpoint (GET /executions/{id}); raises
    NotFound for an execution of another owner's job, as for one that does not exist."""
    job_id, _ = parse_execution_id(execution_id)
    job = ports.store.get_job(job_id)
    execution = None if job is None or job.owner != owner else ports.store.find_execution(job_id, execution_id)
    if execution is None:
        raise NotFound(f"execution {execution_id!r} not found", field="executionId")
    return execution
