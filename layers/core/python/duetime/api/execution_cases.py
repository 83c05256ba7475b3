"""The use cases of the /executions routes: a worker's heartbeat and outcome for the attempt it holds,
an owner reading one execution or retrying it."""

from __future__ import annotations

from duetime.api.models import (
    CompleteRequest,
    HeartbeatRequest,
    HeartbeatResponse,
)
from duetime.api.routing import Call, Reply
from duetime.domain.errors import Conflict
from duetime.service import checkpoints as checkpoint_cases
from duetime.service import executions as execution_cases
from duetime.service import redrive as redrive_cases


def heartbeat(call: Call) -> Reply:
    request = call.body_as(HeartbeatRequest)
    execution_id, who = call.path["executionId"], (request.attempt, request.worker_id, request.claim_token)
    if request.has_checkpoint:
        updated = checkpoint_cases.report_checkpoint(call.ports, execution_id, *who, request.checkpoint)
    else:
        updated = execution_cases.report_heartbeat(call.ports, execution_id, *who)
    if updated.lease_until is None:  # a running row always has a lease; never report a bare 200
        raise Conflict("the execution holds no lease", field="attempt")
    return Reply(200, HeartbeatResponse(lease_until=updated.lease_until))


def complete(call: Call) -> Reply:
    request = call.body_as(CompleteRequest)
    ended = execution_cases.report_outcome(
        call.ports,
        call.path["executionId"],
        request.attempt,
        request.worker_id,
        request.claim_token,
        succeeded=request.result == "succeeded",
        result=request.output,
        error=request.error,
        retryable=request.retryable,
    )
    return Reply(200, ended)


def get_execution(call: Call) -> Reply:
    return Reply(200, checkpoint_cases.get_owned_execution(call.ports, call.owner, call.path["executionId"]))


def retry_execution(call: Call) -> Reply:
    return Reply(200, redrive_cases.retry_execution(call.ports, call.owner, call.path["executionId"]))
