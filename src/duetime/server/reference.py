"""Render the OpenAPI document as a Markdown reference: `python -m duetime.server.reference`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

METHODS = ("get", "post", "patch", "put", "delete")


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return (
            f"[{schema['$ref'].rsplit('/', 1)[-1]}](#{schema['$ref'].rsplit('/', 1)[-1].lower()})"
        )
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra) if isinstance(extra, dict) else 'any'}"
    if schema.get("format") == "date-time":
        return "RFC 3339 time"
    return str(kind)


def _limits(schema: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">")):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    for key, label in (("minLength", "min length"), ("maxLength", "max length")):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    if "default" in schema and schema["default"] is not None:
        parts.append(f"default {json.dumps(schema['default'])}")
    return ", ".join(parts)


def render(doc: dict[str, Any]) -> str:
    out = [
        f"# REST API reference ({doc['info']['title']} {doc['info']['version']})",
        "",
        "Generated from the server's OpenAPI document by `make api-reference`; a running",
        "server serves the same document at `/openapi.json` and an explorer at `/docs`.",
        "See [api.md](api.md) for the guide. Every route needs `Authorization: Bearer <token>`",
        "unless the server runs with `--no-auth`.",
        "",
    ]
    for path, item in doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            out += [f"## {method.upper()} {path}", ""]
            if op.get("summary"):
                out += [op["summary"] + ".", ""]
            if op.get("description"):
                out += [op["description"].strip(), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | notes |", "|---|---|---|---|---|"]
                for p in params:
                    schema = p.get("schema", {})
                    notes = " ".join(x for x in (p.get("description", ""), _limits(schema)) if x)
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_type(schema)} | "
                        f"{'yes' if p.get('required') else 'no'} | {notes} |"
                    )
                out.append("")
            body = op.get("requestBody")
            if body:
                schema = body["content"]["application/json"]["schema"]
                out += [f"Body: {_type(schema)}", ""]
            out += ["| status | meaning | body |", "|---|---|---|"]
            for status, response in op["responses"].items():
                content = response.get("content", {}).get("application/json", {})
                shape = _type(content["schema"]) if "schema" in content else "-"
                out.append(f"| {status} | {response.get('description', '')} | {shape} |")
            out.append("")
    out += ["# Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out += [f"## {name}", ""]
        if schema.get("description"):
            out += [schema["description"].strip(), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | notes |", "|---|---|---|---|"]
            for field, spec in props.items():
                notes = " ".join(x for x in (spec.get("description", ""), _limits(spec)) if x)
                out.append(
                    f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} "
                    f"| {notes} |"
                )
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def openapi() -> dict[str, Any]:
    from duetime.client import App
    from duetime.server import create_app

    doc: dict[str, Any] = create_app(App("sqlite:///:memory:")).openapi()
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the OpenAPI JSON instead")
    args = parser.parse_args(argv)
    doc = openapi()
    sys.stdout.write(json.dumps(doc, indent=2) + "\n" if args.json else render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
