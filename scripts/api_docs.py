"""Write docs/api.md from the OpenAPI document the API serves (`GET /openapi.json`); `--check` fails if stale.

.venv/bin/python scripts/api_docs.py          # rewrite docs/api.md
.venv/bin/python scripts/api_docs.py --check  # exit 1 if docs/api.md differs from what it would write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

from duetime.api.openapi import openapi_document  # noqa: E402

API_DOC = ROOT / "docs" / "api.md"
METHODS = ("get", "put", "post", "patch", "delete")


def _cell(text: Any) -> str:
    """Text fit for one markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return str(ref).rsplit("/", 1)[-1] if ref else None


def _type_of(schema: dict[str, Any]) -> str:
    """A short type: a link to a named schema, `array of X`, an enum's values, or the JSON type and format."""
    name = _ref_name(schema)
    if name:
        return f"[{name}](#{name.lower()})"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " or ".join(_type_of(s) for s in schema[combinator])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type_of(schema.get('items', {}))}"
    text = f"{kind} ({schema['format']})" if "format" in schema else str(kind)
    return f"{text}, nullable" if schema.get("nullable") else text


def _limits(schema: dict[str, Any]) -> str:
    """The constraints a value must meet, as the schema states them."""
    words = {
        "minimum": "≥ {}",
        "maximum": "≤ {}",
        "minLength": "length ≥ {}",
        "maxLength": "length ≤ {}",
        "minItems": "≥ {} items",
        "maxItems": "≤ {} items",
        "pattern": "matches `{}`",
    }
    parts = [template.format(schema[key]) for key, template in words.items() if key in schema]
    if schema.get("default") is not None:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return ", ".join(parts)


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", _cell(op.get("summary", "")), ""]
    security = op.get("security")
    if security == []:
        lines += ["No token needed.", ""]
    elif security:
        lines += ["Caller: " + ", ".join(f"`{name}`" for s in security for name in s) + ".", ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | |", "| --- | --- | --- | --- | --- |"]
        for p in params:
            schema = p.get("schema", {})
            note = "; ".join(x for x in (_cell(p.get("description", "")), _limits(schema)) if x)
            required = "yes" if p.get("required") else "no"
            lines.append(f"| `{p['name']}` | {p['in']} | {_type_of(schema)} | {required} | {note} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        content = body["content"]["application/json"]
        lines += [f"Body: {_type_of(content['schema'])}.", ""]
        if "example" in content:
            lines += ["```json", json.dumps(content["example"], indent=2), "```", ""]
    lines += ["| status | means | body |", "| --- | --- | --- |"]
    for status, response in op.get("responses", {}).items():
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        lines.append(f"| {status} | {_cell(response.get('description', ''))} | {_type_of(schema) if schema else ''} |")
    return [*lines, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    if "enum" in schema:
        return [*lines, "One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    properties = schema.get("properties", {})
    if not properties:
        return [*lines, f"Type: {_type_of(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | |", "| --- | --- | --- | --- |"]
    for field, prop in properties.items():
        note = "; ".join(x for x in (_cell(prop.get("description", "")), _limits(prop)) if x)
        lines.append(f"| `{field}` | {_type_of(prop)} | {'yes' if field in required else 'no'} | {note} |")
    if schema.get("additionalProperties") is False:
        lines += ["", "No other field is accepted."]
    return [*lines, ""]


def render(document: dict[str, Any]) -> str:
    """docs/api.md for `document`: every operation, then every schema, in the document's own order."""
    info = document["info"]
    lines = [
        "# API reference",
        "",
        "This page is for calling the HTTP API: every route and every schema of the OpenAPI document it serves.",
        "",
        "<!-- Generated by scripts/api_docs.py from the OpenAPI document the API serves; do not edit by hand."
        " `make docs` rewrites it; tests/unit/test_docs.py fails when it is stale. -->",
        "",
        f"{_cell(info.get('description', ''))} OpenAPI {document['openapi']}, API version {info['version']}:"
        " `GET /openapi.json` serves the whole document.",
        "",
        "## Authentication",
        "",
    ]
    for name, scheme in document.get("components", {}).get("securitySchemes", {}).items():
        lines.append(f"- `{name}`: {scheme.get('scheme', scheme.get('type'))}; {_cell(scheme.get('description', ''))}")
    default = ", ".join(f"`{name}`" for s in document.get("security", []) for name in s)
    lines += ["", f"Every route takes {default} unless it says otherwise.", "", "## Routes", ""]
    for path, operations in document["paths"].items():
        for method in METHODS:
            if method in operations:
                lines += _operation(method, path, operations[method])
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is not what would be written")
    args = parser.parse_args(argv)
    text = render(openapi_document())
    if args.check:
        if not API_DOC.exists() or API_DOC.read_text(encoding="utf-8") != text:
            print(f"{API_DOC.relative_to(ROOT)} is stale: run scripts/api_docs.py", file=sys.stderr)
            return 1
        return 0
    API_DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
