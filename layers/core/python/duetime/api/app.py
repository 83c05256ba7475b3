"""The resolver that serves duetime.api.routes: it admits the caller, checks the path, parses the page and
the body for each route as declared, runs the route's use case and turns every error into a JSON body."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from pydantic import BaseModel

from duetime.api.auth import Caller, caller_from_event
from duetime.api.models import MAX_PAGE, ErrorDetail, ErrorResponse
from duetime.api.parsing import parse_body
from duetime.api.routes import DEFAULT_PAGE, ROUTES
from duetime.api.routing import RETRY_AFTER, Access, Call, Page, Reply, Route, status_of
from duetime.domain.errors import DuetimeError, InvalidInput, NotFound
from duetime.service.context import Ports

LIMIT_DIGITS = 4  # more cannot be a page size in range, and int() of a long string costs


def error_response(error: DuetimeError) -> Response[str]:
    status = status_of(error)
    body = ErrorResponse(error=ErrorDetail(code=error.code, message=error.message, field=error.field or None))
    # A quota or a busy store says when to try again.
    headers = {RETRY_AFTER: str(error.retry_after)} if error.retry_after else None
    return Response(
        status_code=status,
        content_type="application/json",
        body=body.model_dump_json(by_alias=True, exclude_none=True),
        headers=headers,
    )


def admitted(access: Access, caller: Callable[[], Caller]) -> Caller | None:
    """The caller if `access` admits it; a verified token of the other kind is 404, as if nothing were there."""
    if access is Access.PUBLIC:
        return None
    found = caller()
    if access is Access.OWNER and found.is_worker:
        raise NotFound("job routes are for job owners", field="jobId")
    if access is Access.WORKER and not found.is_worker:
        raise NotFound("worker routes need a worker token", field="executionId")
    return found


def page_of(query: Mapping[str, str] | None) -> Page:
    """The `limit` and `cursor` of a listing's query; raises InvalidInput naming `limit`."""
    params = query or {}
    raw = params.get("limit")
    if raw is None:
        return Page(DEFAULT_PAGE, params.get("cursor") or None)
    if not (raw.isascii() and raw.isdigit() and len(raw) <= LIMIT_DIGITS) or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_PAGE}", field="limit")
    return Page(int(raw), params.get("cursor") or None)


def reply_response(route: Route, reply: Reply) -> Response[str]:
    """The reply as JSON; a status the route does not declare is a bug, never sent as if documented."""
    if reply.status not in route.ok:
        raise RuntimeError(f"{route.method} {route.path} answered {reply.status}, which it does not declare")
    if reply.body is None:
        return Response(status_code=reply.status, body="", headers=reply.headers)
    body = reply.body
    text = body.model_dump_json(by_alias=True) if isinstance(body, BaseModel) else json.dumps(body)
    return Response(status_code=reply.status, content_type="application/json", body=text, headers=reply.headers)


def build_app(
    ports: Ports, local_secret: str | None = None, local_audience: str | None = None
) -> APIGatewayRestResolver:
    """The API Gateway resolver over `ports`; `local_secret` verifies tokens when no gateway does, and
    `local_audience` (the data dir's instance id) is then the audience they must name."""
    app = APIGatewayRestResolver()

    def caller() -> Caller:
        return caller_from_event(app.current_event.raw_event, local_secret, local_audience)

    def raw_body() -> str:
        raw = app.current_event.body or ""
        if app.current_event.is_base64_encoded:
            try:
                raw = base64.b64decode(raw).decode("utf-8")
            except ValueError as exc:
                raise InvalidInput("the body must be UTF-8 JSON", field="body") from exc
        return raw

    def endpoint(route: Route) -> Callable[..., Response[str]]:
        checks = {p.name: p.check for p in route.params if p.where == "path"}
        queried = [p.name for p in route.params if p.where == "query"]

        def serve(**values: str) -> Response[str]:
            who = admitted(route.access, caller)
            path = {name: check(values[name]) if check else values[name] for name, check in checks.items()}
            event = app.current_event
            given = event.multi_value_query_string_parameters or {}
            raw = raw_body() if route.body is not None else ""
            body = None
            if route.body is not None and (route.body_required or raw.strip()):
                body = parse_body(raw, route.body, route.max_body_bytes)
            call = Call(
                ports=ports,
                caller=who,
                path=path,
                headers=event.headers or {},
                paging=page_of(event.query_string_parameters) if route.paged else None,
                body=body,
                query={name: given[name] for name in queried if given.get(name)},
            )
            return reply_response(route, route.run(call))

        serve.__name__ = route.run.__name__
        return serve

    @app.exception_handler(DuetimeError)  # type: ignore[untyped-decorator]
    def handle_domain_error(error: DuetimeError) -> Response[str]:
        return error_response(error)

    @app.not_found
    def handle_not_found(_: Exception) -> Response[str]:
        return error_response(NotFound("no such route", field="path"))

    for route in ROUTES:
        app.route(route.rule, route.method)(endpoint(route))
    return app


# Powertools keeps the request being served on the resolver's class (`BaseRouter.current_event`), shared by
# every resolver in the process. Lambda sends an environment one request at a time, so there it is safe.
_RESOLVING = threading.Lock()


def one_at_a_time(app: APIGatewayRestResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The API handler for a server that answers on threads (`duetime local`): it resolves one request at a
    time in this process. Side by side, two requests read each other's event: the console's history asked
    for executions and was answered the job, and a preview lost its body. `duetime local` answers side by
    side in processes instead (`duetime local --api-processes N`)."""

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        with _RESOLVING:
            return dict(app.resolve(event, context))

    return handle
