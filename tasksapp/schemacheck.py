"""Checking values against a server's JSON Schema (Draft 2020-12) without trusting the schema.

A plain jsonschema validator would fetch remote `$ref`s over the network, run the server's
regular expressions (catastrophic backtracking), and recurse as deep as the schema goes.
Here nothing is fetched, `pattern` is left to the server, and schema size is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError
from jsonschema.exceptions import ValidationError as SchemaViolation
from jsonschema_specifications import REGISTRY as LOCAL_METASCHEMAS  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable

MAX_SCHEMA_NODES = 50_000
MAX_SCHEMA_DEPTH = 40
MAX_ISSUES = 20
MAX_ISSUE_TEXT = 300


class SchemaUncheckable(Exception):
    """The schema cannot be used to check a value; the message says why, for a person."""


def _pattern_left_to_server(*_: Any) -> None:
    return None


_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern_left_to_server})


def _nodes(schema: object) -> Iterator[int]:
    """The depth of every node of a JSON value, walked without recursion."""
    stack: list[tuple[object, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        yield depth
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _check_size(schema: object) -> None:
    for count, depth in enumerate(_nodes(schema)):
        if count > MAX_SCHEMA_NODES or depth > MAX_SCHEMA_DEPTH:
            raise SchemaUncheckable("The schema is too large to check here; the server will check it.")


def schema_issues(schema: object, instance: object) -> list[SchemaViolation]:
    """Up to MAX_ISSUES violations of schema by instance, ordered by where they occur.

    Raises SchemaUncheckable when the schema is not valid JSON Schema, is too large, or
    refers to something that is not inside it.
    """
    _check_size(schema)
    try:
        _Validator.check_schema(schema)
        checker = _Validator(schema, registry=LOCAL_METASCHEMAS, format_checker=FormatChecker())
        issues = list(islice(checker.iter_errors(instance), MAX_ISSUES))
    except SchemaError as exc:
        raise SchemaUncheckable(f"The schema is not valid JSON Schema: {issue_text(exc)}") from exc
    except Unresolvable as exc:
        reference = _clip(str(exc))
        raise SchemaUncheckable(f"The schema refers to something it does not contain ({reference}).") from exc
    except RecursionError as exc:
        raise SchemaUncheckable("The schema nests too deeply to check here.") from exc
    return sorted(issues, key=lambda issue: issue.json_path)


def issue_text(issue: SchemaViolation | SchemaError) -> str:
    """The issue's message, bounded (it quotes the value and the schema, both of any size)."""
    return _clip(issue.message)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ISSUE_TEXT else text[: MAX_ISSUE_TEXT - 1] + "…"


def property_of(issue: SchemaViolation) -> str | None:
    """The top-level property an issue concerns, or None when it concerns the whole object."""
    if issue.path:
        head = issue.path[0]
        return head if isinstance(head, str) else None
    if issue.validator == "required" and isinstance(issue.instance, dict):
        names = issue.validator_value if isinstance(issue.validator_value, list) else []
        for name in names:
            if isinstance(name, str) and name not in issue.instance and repr(name) in issue.message:
                return name
    return None
