"""The published JSON Schema of a query record (docs/query-format.schema.json), applied with jsonschema.

Problems come back as (field, message): the field is the error's JSON path without "$." (e.g.
`verification.terminal[0].key`), the message is short and never a Python repr of the schema.
A subschema may carry "x-problem", the message to show when its pattern/anyOf/oneOf fails.
"""
from __future__ import annotations

import json
from functools import cache

from django.conf import settings
from jsonschema import Draft202012Validator

SCHEMA_PATH = settings.BASE_DIR / "docs" / "query-format.schema.json"
TYPE_WORDS = {"string": "a string", "array": "a list", "object": "an object", "null": "null",
              "integer": "an integer", "number": "a number", "boolean": "true or false"}
# Validators whose failure is best explained by the subschema's own "x-problem" words.
EXPLAINED = {"pattern", "minLength", "minItems", "anyOf", "oneOf", "format", "const"}


@cache
def query_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@cache
def _validator(definition: str = "") -> Draft202012Validator:
    schema = query_schema()
    if definition:  # one $defs entry, resolved against the whole document
        schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _field(path: str, name: str = "") -> str:
    field = path[2:] if path.startswith("$.") else ("" if path == "$" else path)
    if name:
        field = f"{field}.{name}" if field else name
    return field or "(line)"


def _type_words(expected) -> str:
    names = expected if isinstance(expected, list) else [expected]
    return " or ".join(TYPE_WORDS.get(name, name) for name in names)


def _problems_of(error) -> list[tuple[str, str]]:
    kind, schema, instance = error.validator, error.schema, error.instance
    if kind == "required":
        return [(_field(error.json_path, name), "is required")
                for name in error.validator_value if isinstance(instance, dict) and name not in instance]
    if kind in ("additionalProperties", "unevaluatedProperties"):
        known = set(schema.get("properties", {}))
        return [(_field(error.json_path, name), "unknown field") for name in sorted(set(instance) - known)]
    field = _field(error.json_path)
    if kind == "type":
        return [(field, "must be a JSON object" if field == "(line)" else f"must be {_type_words(error.validator_value)}")]
    if kind == "enum":
        return [(field, f"must be one of {list(error.validator_value)}")]
    if kind == "maxLength":
        return [(field, f"must be at most {error.validator_value} characters")]
    if kind in EXPLAINED and isinstance(schema, dict) and schema.get("x-problem"):
        return [(field, schema["x-problem"])]
    if kind == "format":
        return [(field, f"is not a valid {error.validator_value}")]
    return [(field, error.message[:200])]


def _problems(validator: Draft202012Validator, instance) -> list[tuple[str, str]]:
    problems = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.path)), e.validator)):
        for problem in _problems_of(error):
            if problem not in problems:
                problems.append(problem)
    return problems


def record_problems(record) -> list[tuple[str, str]]:
    """Every (field, message) by which a decoded JSONL record fails the schema."""
    return _problems(_validator(), record)


def terminal_check_problems(check) -> list[tuple[str, str]]:
    """Every (field, message) by which one terminal check fails the schema (fields relative to it)."""
    return _problems(_validator("terminal_check"), check)


def verification_problems(spec) -> list[tuple[str, str]]:
    """Every (field, message) by which a verification spec fails the schema (fields relative to it)."""
    return _problems(_validator("verification"), spec)
