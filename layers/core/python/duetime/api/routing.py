"""How a route is declared (method, path, models, answers, who may call, the use case it runs), and the
OpenAPI 3.0 document made from the declarations, so what is served and what is documented are one thing.

Pure and cheap: no AWS clients, no I/O. OpenAPI 3.0 rather than 3.1 because API Gateway imports 3.0;
pydantic's JSON Schema 2020-12 is turned into 3.0's dialect (`nullable`, no `const`) here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from duetime.api.auth import Caller
from duetime.api.models import ErrorResponse
from duetime.definitions import API_MAX_REQUEST_BYTES
from duetime.domain.errors import (
    Conflict,
    DuetimeError,
    Forbidden,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    QuotaExceeded,
    Unauthorized,
    Unavailable,
)
from duetime.service.context import Ports

TITLE = "duetime"
VERSION = "1.0.0"
REF = "#/components/schemas/{model}"
Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ErrorStatus:
    """The HTTP status a domain error answers with, and what it means to a client (said in the document)."""

    error: type[DuetimeError]
    status: int
    meaning: str


# The one place domain errors meet HTTP; the first that matches wins (StaleAttempt is a Conflict).
ERROR_STATUSES = (
    ErrorStatus(InvalidInput, 400, "invalid input; `error.field` names the offending field"),
    ErrorStatus(Unauthorized, 401, "no bearer token, or one that does not verify"),
    ErrorStatus(
        Forbidden,
        403,
        "the handler or a failure destination is not granted to this owner or the caller's current groups; "
        "`error.field` names it (`handler`, `notify.onFailure[i].webhook`...)",
    ),
    ErrorStatus(
        NotFound, 404, "no such job, execution or calendar for this caller (another owner's is not found either)"
    ),
    ErrorStatus(
        Conflict,
        409,
        "the change does not apply to the current state, or the attempt is stale; a calendar still in use",
    ),
    ErrorStatus(IdempotencyMismatch, 422, "the Idempotency-Key was used with a different body"),
    ErrorStatus(
        QuotaExceeded,
        429,
        "an owner quota is exceeded; `error.field` names it (activeJobs, jobCreatesPerMinute, runNowsPerMinute, "
        "backfillSlotsPerHour)",
    ),
    ErrorStatus(
        Unavailable,
        503,
        "the store was busy (locally: a process held the write lock too long); retry (a create: same Idempotency-Key)",
    ),
)
# A 429 or a 503 says when to try again (RFC 9110 Retry-After, in seconds).
RETRY_STATUSES = (429, 503)
RETRY_AFTER = "Retry-After"
RETRY_AFTER_HEADER = {
    RETRY_AFTER: {"description": "seconds until the request may succeed", "schema": {"type": "integer", "minimum": 1}}
}
ERROR_MEANINGS = {known.status: known.meaning for known in ERROR_STATUSES}


def status_of(error: DuetimeError) -> int:
    return next((known.status for known in ERROR_STATUSES if isinstance(error, known.error)), 400)


class Access(StrEnum):
    """Who may call a route. A verified token of the other kind gets 404, as if the route named nothing."""

    OWNER = "owner"  # a job owner's token (Cognito on AWS)
    WORKER = "worker"  # a worker (IAM on AWS, a worker token locally)
    CALLER = "caller"  # any verified token
    PUBLIC = "public"  # no token at all

    def security(self) -> list[dict[str, list[str]]] | None:
        """The operation's OpenAPI `security`, or None for the document's default (an owner's bearer token)."""
        by_access: dict[Access, list[dict[str, list[str]]]] = {Access.WORKER: [{"workerAuth": []}], Access.PUBLIC: []}
        return by_access.get(self)


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter. `check` turns a path value that cannot name anything into a
    NotFound before any read (and returns the value otherwise)."""

    name: str
    where: Literal["path", "query", "header"]
    description: str
    schema: Mapping[str, Any]
    check: Callable[[str], str] | None = None
    repeatable: bool = False  # a query parameter given any number of times (?tag=a&tag=b): an array

    def openapi(self) -> dict[str, Any]:
        declared = {
            "name": self.name,
            "in": self.where,
            "required": self.where == "path",
            "description": self.description,
            "schema": {"type": "array", "items": dict(self.schema)} if self.repeatable else dict(self.schema),
        }
        if self.repeatable:
            declared |= {"style": "form", "explode": True}
        return declared


@dataclass(frozen=True)
class Answer:
    """A success status's body: a model, a bare JSON schema, or nothing (204)."""

    description: str
    model: type[BaseModel] | None = None
    schema: Mapping[str, Any] | None = None

    def openapi(self) -> dict[str, Any]:
        if self.model is None and self.schema is None:
            return {"description": self.description}
        schema = ref(self.model) if self.model is not None else dict(self.schema or {})
        return {"description": self.description, "content": {"application/json": {"schema": schema}}}


@dataclass(frozen=True)
class Page:
    """A listing's page request: how many, and after which cursor (the previous page's `nextCursor`)."""

    limit: int
    cursor: str | None


@dataclass(frozen=True)
class Call:
    """One request as a route's use case sees it: admitted caller, checked path values, parsed body."""

    ports: Ports
    caller: Caller | None  # None on public routes only
    path: Mapping[str, str]
    headers: Mapping[str, str]
    paging: Page | None = None  # on paged routes
    body: BaseModel | None = None  # the route's body model, validated (None when an optional body is absent)
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)  # the declared query parameters given

    @property
    def who(self) -> Caller:
        if self.caller is None:
            raise TypeError("a public route has no caller")
        return self.caller

    @property
    def owner(self) -> str:
        return self.who.owner

    @property
    def page(self) -> Page:
        if self.paging is None:
            raise TypeError("the route is not declared paged")
        return self.paging

    def body_as(self, model: type[M]) -> M:
        if not isinstance(self.body, model):
            raise TypeError(f"the route declares no {model.__name__} body")
        return self.body

    def optional_body(self, model: type[M]) -> M | None:
        """The body of a route whose body is optional: None when the request had none."""
        return None if self.body is None else self.body_as(model)

    def first(self, name: str) -> str | None:
        """A query parameter given once (its first value), or None."""
        values = self.query.get(name) or ()
        return values[0] if values else None


@dataclass(frozen=True)
class Reply:
    """What a use case answers: a status its route declares, and a body (None for 204)."""

    status: int
    body: BaseModel | Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None  # beside the body (Preference-Applied)


@dataclass(frozen=True)
class Route:
    """One route of the API, declared once: served by `duetime.api.app`, documented by `document_of`.

    `run` is the use case; its name in camelCase is the operationId. `errors` are the statuses the use
    case itself may answer; the declaration adds the rest: 400 for a body or a page, 401 for any token,
    404 for an owner's or a worker's route (a token of the other kind).
    """

    method: Method
    path: str  # as OpenAPI writes it: /jobs/{jobId}
    run: Callable[[Call], Reply]
    summary: str
    ok: Mapping[int, Answer]
    access: Access = Access.OWNER
    params: Sequence[Param] = ()  # one for each {name} in `path`, then any headers
    body: type[BaseModel] | None = None
    body_required: bool = True  # False: an empty request body is no body (and the gateway does not check it)
    example: Any = None  # of the body
    paged: bool = False  # takes `limit` and `cursor`
    errors: tuple[int, ...] = ()
    max_body_bytes: int = API_MAX_REQUEST_BYTES  # the API's bound on this route's body

    def __post_init__(self) -> None:
        named = re.findall(r"{(\w+)}", self.path)
        declared = [p.name for p in self.params if p.where == "path"]
        if named != declared:
            raise ValueError(f"{self.method} {self.path} declares path parameters {declared}, not {named}")

    @property
    def operation_id(self) -> str:
        first, *rest = self.run.__name__.split("_")
        return first + "".join(word.capitalize() for word in rest)

    @property
    def rule(self) -> str:
        """The path as Powertools' resolver matches it: /jobs/<jobId>."""
        return re.sub(r"{(\w+)}", r"<\1>", self.path)

    def error_statuses(self) -> list[int]:
        statuses = set(self.errors)
        if self.body is not None or self.paged:
            statuses.add(400)
        if self.access is not Access.PUBLIC:
            statuses.add(401)
        if self.access in (Access.OWNER, Access.WORKER):
            statuses.add(404)
        if self.access is not Access.PUBLIC:
            statuses.add(503)  # every route behind a token reads the store
        return sorted(statuses)

    def operation(self, page_params: Sequence[Param]) -> dict[str, Any]:
        responses = {str(code): answer.openapi() for code, answer in self.ok.items()}
        for code in self.error_statuses():
            responses[str(code)] = Answer(ERROR_MEANINGS[code], ErrorResponse).openapi()
            if code in RETRY_STATUSES:
                responses[str(code)]["headers"] = RETRY_AFTER_HEADER
        operation: dict[str, Any] = {"operationId": self.operation_id, "summary": self.summary}
        parameters = [p.openapi() for p in self.params] + [p.openapi() for p in page_params if self.paged]
        if parameters:
            operation["parameters"] = parameters
        if self.body is not None:
            media: dict[str, Any] = {"schema": ref(self.body)}
            if self.example is not None:
                media["example"] = self.example
            operation["requestBody"] = {"required": self.body_required, "content": {"application/json": media}}
        operation["responses"] = responses
        security = self.access.security()
        if security is not None:
            operation["security"] = security
        return operation


def ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def wire_models(routes: Sequence[Route]) -> list[type[BaseModel]]:
    """Every model a route takes or answers with, and the error body, once each in declaration order."""
    found: dict[type[BaseModel], None] = {}
    for route in routes:
        if route.body is not None:
            found[route.body] = None
        for answer in route.ok.values():
            if answer.model is not None:
                found[answer.model] = None
    found[ErrorResponse] = None
    return list(found)


def to_openapi30(node: Any) -> Any:
    """JSON Schema 2020-12 (pydantic) -> OpenAPI 3.0 schema objects: `X | None` becomes `nullable`."""
    if isinstance(node, list):
        return [to_openapi30(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_openapi30(v) for k, v in node.items()}
    if "const" in out:
        out["enum"] = [out.pop("const")]
    variants = out.get("anyOf")
    if isinstance(variants, list) and {"type": "null"} in variants:
        rest = [v for v in variants if v != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            out = {**rest[0], **out}
        elif len(rest) == 1:
            out["allOf"] = rest
        elif rest:
            out["anyOf"] = rest
        out["nullable"] = True
    return out


@lru_cache(maxsize=4)
def _component_schemas(models: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    # Validation-mode schemas describe responses too: the models' serializer (ISO UTC times) writes
    # exactly what their validators read.
    _, top = models_json_schema([(m, "validation") for m in models], by_alias=True, ref_template=REF)
    schemas: dict[str, Any] = to_openapi30(top.get("$defs", {}))
    return schemas


@dataclass(frozen=True)
class Api:
    """The routes and what the document says around them."""

    routes: Sequence[Route]
    page_params: Sequence[Param] = ()
    security_schemes: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def document(self, server_url: str | None = None) -> dict[str, Any]:
        """The OpenAPI 3.0 document; a fresh dict on every call (callers may edit it)."""
        paths: dict[str, dict[str, Any]] = {}
        for route in self.routes:
            paths.setdefault(route.path, {})[route.method.lower()] = route.operation(self.page_params)
        document: dict[str, Any] = {
            "openapi": "3.0.3",
            "info": {"title": TITLE, "version": VERSION, "description": self.description},
            "paths": paths,
            "components": {
                "schemas": copy.deepcopy(_component_schemas(tuple(wire_models(self.routes)))),
                "securitySchemes": copy.deepcopy(dict(self.security_schemes)),
            },
            "security": [{"bearerAuth": []}],
        }
        if server_url:
            document["servers"] = [{"url": server_url}]
        return document
