"""A validator for the part of JSON Schema (draft 2020-12) that the report's and the
expectation files' schemas use (``reports/schema/``), so checking a report needs no
dependency. A schema using any other keyword is refused rather than half-checked."""
from __future__ import annotations

import json
import re
from pathlib import Path

from triton_cts import CHECKOUT

SCHEMA_DIR = CHECKOUT / "reports" / "schema"
#: The keywords understood; annotations (title, description, x-...) are read by the
#: reference page's generator.
KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum",
            "const", "$ref", "minLength", "pattern"}
ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


class SchemaError(ValueError):
    """A schema that uses a keyword this validator does not implement."""


def load_schema(name: str) -> dict:
    """``report`` or ``expectations``: the schema in reports/schema/."""
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    check_schema(schema)
    return schema


def check_schema(schema, where: str = "#") -> None:
    """Refuse keywords the validator does not implement, anywhere in ``schema``."""
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be an object")
    unknown = {k for k in schema if k not in KEYWORDS | ANNOTATIONS and not k.startswith("x-")}
    if unknown:
        raise SchemaError(f"{where}: keyword(s) {', '.join(sorted(unknown))} not supported "
                          f"by triton_cts.results.json_schema")
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}/properties/{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        check_schema(sub, f"{where}/$defs/{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            check_schema(schema[key], f"{where}/{key}")


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def validate(instance, schema: dict, root: dict | None = None, path: str = "$",
             limit: int = 50) -> list[str]:
    """Every way ``instance`` breaks ``schema``, one line each naming where (``$.records
    [3].status``); empty when it conforms. Stops after ``limit`` problems."""
    problems: list[str] = []
    _check(instance, schema, root or schema, path, problems, limit)
    return problems


def _check(value, schema, root, path, problems, limit) -> None:
    if len(problems) >= limit:
        return
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise SchemaError(f"$ref {ref!r}: only #/$defs/NAME is supported")
        schema = root["$defs"][ref.removeprefix("#/$defs/")]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            problems.append(f"{path}: {_show(value)} is not {' or '.join(kinds)}")
            return
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: {_show(value)} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {_show(value)} is not one of "
                        f"{', '.join(map(repr, schema['enum']))}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: shorter than {schema['minLength']} character(s)")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{path}: {_show(value)} does not match {schema['pattern']!r}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                problems.append(f"{path}: missing required field {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], root, f"{path}.{key}", problems, limit)
            elif extra is False:
                problems.append(f"{path}: unknown field {key!r}")
            elif isinstance(extra, dict):
                _check(item, extra, root, f"{path}.{key}", problems, limit)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, schema["items"], root, f"{path}[{i}]", problems, limit)


def _show(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def fields(schema: dict, root: dict | None = None, prefix: str = "") -> list[tuple[str, dict]]:
    """Every named field of ``schema``, depth first: ``(path, its schema)`` with paths such
    as ``records[].errors[].ratio``; ``$ref`` followed (the report's schema has no cycles)."""
    root = root or schema
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append((path, sub))
        out += fields(sub, root, path)
    items = schema.get("items")
    if isinstance(items, dict):
        out += fields(items, root, prefix + "[]")
    return out


def resolve(schema: dict, root: dict) -> dict:
    """``schema`` with its ``$ref`` followed."""
    if "$ref" in schema:
        return root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema


def schema_path(name: str) -> Path:
    return SCHEMA_DIR / f"{name}.schema.json"
