"""The use cases of the /dead-letters routes: an owner's failed executions, and their redrive."""

from __future__ import annotations

from duetime.api.models import (
    ExecutionPage,
    RedriveRefusal,
    RedriveRequest,
    RedriveResponse,
)
from duetime.api.pages import size_bounded
from duetime.api.routing import Call, Reply
from duetime.domain.models import Execution
from duetime.service import redrive as redrive_cases


def list_dead_letters(call: Call) -> Reply:
    ports, owner = call.ports, call.owner

    def fetch(limit: int, cursor: str | None) -> tuple[list[Execution], str | None]:
        page = redrive_cases.list_dead_letters(ports, owner, limit, cursor)
        return page.items, page.cursor

    items, next_cursor = size_bounded(fetch, call.page.limit, call.page.cursor)
    return Reply(200, ExecutionPage(executions=items, next_cursor=next_cursor))


def redrive_dead_letters(call: Call) -> Reply:
    request = call.body_as(RedriveRequest)
    selection = None
    if request.execution_ids is None:
        selection = redrive_cases.DeadLetterFilter(request.job_id, request.failed_after, request.failed_before)
    report = redrive_cases.redrive(
        call.ports, call.owner, request.execution_ids, selection, request.limit, request.cursor
    )
    refused = [RedriveRefusal(execution_id=r.execution_id, code=r.code, message=r.message) for r in report.refused]
    return Reply(200, RedriveResponse(retried=report.retried, refused=refused, next_cursor=report.next_cursor))
