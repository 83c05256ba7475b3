"""The OpenAPI 3.0 document of the API, made from the route table (duetime.api.routes), and the request
models API Gateway validates bodies with (JSON Schema draft 4), made from that document.

Pure and cheap: no AWS clients, no I/O. `duetime local` serves the document at GET /openapi.json; the CDK
stack imports `gateway_request_schemas()` so the gateway refuses what the handler would refuse.
"""

from __future__ import annotations

from typing import Any

from duetime.api.routes import API


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.0 document of duetime's HTTP API; a fresh dict on every call (callers may edit it)."""
    return API.document(server_url)


def _inline(node: Any, schemas: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(n, schemas) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline(schemas[node["$ref"].rsplit("/", 1)[-1]], schemas)
    return {k: _inline(v, schemas) for k, v in node.items()}


def _to_draft4(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema draft 4 as API Gateway models take it (`nullable` -> a type list)."""
    if isinstance(node, list):
        return [_to_draft4(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_draft4(v) for k, v in node.items() if k not in ("nullable", "title", "description")}
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "allOf" in out:
            out = {"anyOf": [{"allOf": out.pop("allOf")}, {"type": "null"}], **out}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def gateway_request_schemas() -> dict[str, dict[str, Any]]:
    """Each request body's schema as an API Gateway model (JSON Schema draft 4, no $ref), keyed by
    "METHOD /path" as in the document, for request validation at the gateway."""
    document = openapi_document()
    schemas = document["components"]["schemas"]
    models: dict[str, dict[str, Any]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body and body["required"]:  # an optional body (run now's) is checked by the API, not the gateway
                schema = _to_draft4(_inline(body["content"]["application/json"]["schema"], schemas))
                models[f"{method.upper()} {path}"] = {"$schema": "http://json-schema.org/draft-04/schema#", **schema}
    return models
