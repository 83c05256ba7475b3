"""Requests as their models, strictly: JSON objects only, camelCase only, errors naming the field; headers by name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from duetime.definitions import API_MAX_REQUEST_BYTES
from duetime.domain.errors import InvalidInput

# A job's payload may take MAX_PAYLOAD_BYTES (JobSpec); the rest of a request body is small.
MAX_BODY_BYTES = API_MAX_REQUEST_BYTES

M = TypeVar("M", bound=BaseModel)


def validation_error(exc: ValidationError) -> InvalidInput:
    """The first pydantic error as InvalidInput naming the field in wire (camelCase) names."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "body"
    return InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field)


def parse_body(raw: str, model: type[M], limit: int = MAX_BODY_BYTES) -> M:
    """A request body as `model`; raises InvalidInput naming the field for anything else.

    Refused: bodies over `limit` bytes (MAX_BODY_BYTES unless the route says), malformed JSON (NaN and
    Infinity included), anything but an object, strings that are not valid Unicode (lone surrogates, which
    DynamoDB cannot store), unknown fields, and snake_case names (the wire speaks camelCase only).
    """
    if len(raw.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidInput(f"request body exceeds {limit} bytes", field="body")
    try:
        data = json.loads(raw, parse_constant=_refuse_constant) if raw.strip() else None
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidInput(f"malformed JSON: {str(exc)[:200]}", field="body") from exc
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object", field="body")
    try:
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise validation_error(exc) from exc


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """The request's header `name` (header names are case-insensitive), or None if it has none."""
    wanted = name.lower()
    return next((v for k, v in (headers or {}).items() if k.lower() == wanted), None)
