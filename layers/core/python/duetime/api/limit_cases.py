"""The use cases of the /limits routes: an owner's named rate limits and concurrency caps (issue 20)."""

from __future__ import annotations

from duetime.api.models import LimitList, LimitRequest, LimitResponse
from duetime.api.routing import Call, Param, Reply
from duetime.domain.limits import LIMIT_NAME, LIMIT_NAME_RULE
from duetime.service import limits as limit_cases

LIMIT_NAME_PARAM = Param(
    "name",
    "path",
    f"a limit name: {LIMIT_NAME_RULE}",
    {"type": "string", "minLength": 1, "pattern": f"^{LIMIT_NAME.pattern}$"},
)


def list_limits(call: Call) -> Reply:
    limits = limit_cases.list_limits(call.ports, call.owner)
    return Reply(200, LimitList(limits=[LimitResponse.of(limit) for limit in limits]))


def get_limit(call: Call) -> Reply:
    return Reply(200, LimitResponse.of(limit_cases.get_limit(call.ports, call.owner, call.path["name"])))


def put_limit(call: Call) -> Reply:
    request = call.body_as(LimitRequest)
    limit, created = limit_cases.put_limit(
        call.ports, call.owner, call.path["name"], request.per_second, request.burst, request.max_concurrent
    )
    return Reply(201 if created else 200, LimitResponse.of(limit))


def delete_limit(call: Call) -> Reply:
    limit_cases.delete_limit(call.ports, call.owner, call.path["name"])
    return Reply(204)
