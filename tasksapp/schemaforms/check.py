"""Checking values against a server's JSON Schema (Draft 2020-12) without trusting the schema.

A plain jsonschema validator would fetch remote `$ref`s over the network, run the server's
regular expressions with Python's backtracking `re` (a pattern like `^(a+)+$` takes hours on
forty characters, holding the whole web process), and recurse as deep as the schema goes.
Here nothing is fetched, schema size is bounded, and every regular expression the server
chose (`pattern`, `patternProperties`, and through them `additionalProperties` and
`propertyNames`) runs on RE2, whose matching time is linear in the input. A pattern RE2
cannot run (back-references, look-around) makes the schema uncheckable here: the server
checks it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from itertools import islice
from typing import Any

import re2  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema._utils import extras_msg
from jsonschema.exceptions import SchemaError
from jsonschema.exceptions import ValidationError as SchemaViolation
from jsonschema_specifications import REGISTRY as LOCAL_METASCHEMAS  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable

MAX_SCHEMA_NODES = 50_000
MAX_SCHEMA_DEPTH = 40
MAX_ISSUES = 20
MAX_ISSUE_TEXT = 300
MAX_PATTERN = 4096

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is reported to the operator, not to stderr
_RE2_OPTIONS.max_mem = 8 << 20


class SchemaUncheckable(Exception):
    """The schema cannot be used to check a value; the message says why, for a person."""


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN:
        raise SchemaUncheckable("The schema has a regular expression too long to check here.")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        raise SchemaUncheckable(
            f"The schema's regular expression {_clip(repr(pattern))} uses features the dashboard does "
            "not run (only linear-time expressions are checked here)."
        ) from None


def pattern_search(pattern: str, text: str) -> bool:
    """ECMA-style `pattern` semantics (unanchored search) in time linear in len(text)."""
    return _compiled(pattern).search(text) is not None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
    if validator.is_type(instance, "string") and not pattern_search(pattern, instance):
        yield SchemaViolation(f"{_clip(repr(instance))} does not match {_clip(repr(pattern))}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[SchemaViolation]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if pattern_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    return [
        key for key in instance if key not in properties and not any(pattern_search(p, key) for p in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[SchemaViolation]:
    """jsonschema's own keyword, with the patternProperties match on RE2."""
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield SchemaViolation(_clip(f"{joined} {verb} not match any of the regexes: {patterns}"))
        else:
            text = "Additional properties are not allowed (%s %s unexpected)"
            yield SchemaViolation(_clip(text % extras_msg(sorted(extras, key=str))))


_Validator = validators.extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def _regex_format(instance: object) -> bool:
    return not isinstance(instance, str) or _compiled(instance) is not None


# The metaschema asks for every `pattern` to be a valid regex; compiling the server's patterns
# with Python's `re` is exactly what must not happen, so schemas are checked without that
# format, and patterns are compiled by RE2 when first used.
_SCHEMA_FORMATS = FormatChecker([name for name in FormatChecker.checkers if name != "regex"])
_VALUE_FORMATS = FormatChecker([name for name in FormatChecker.checkers if name != "regex"])
_VALUE_FORMATS.checks("regex", raises=SchemaUncheckable)(_regex_format)


def _nodes(schema: object) -> Iterator[tuple[object, int]]:
    """Every node of a JSON value with its depth, walked without recursion."""
    stack: list[tuple[object, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _check_shape(schema: object) -> None:
    unevaluated = patterned = False
    for count, (node, depth) in enumerate(_nodes(schema)):
        if count > MAX_SCHEMA_NODES or depth > MAX_SCHEMA_DEPTH:
            raise SchemaUncheckable("The schema is too large to check here; the server will check it.")
        if isinstance(node, dict):
            unevaluated = unevaluated or "unevaluatedProperties" in node
            patterned = patterned or "patternProperties" in node
    if unevaluated and patterned:
        # jsonschema's unevaluatedProperties matches patternProperties with Python's `re`.
        raise SchemaUncheckable(
            "The schema combines unevaluatedProperties with patternProperties, which the dashboard "
            "does not check; the server will check it."
        )


def schema_issues(schema: object, instance: object) -> list[SchemaViolation]:
    """Up to MAX_ISSUES violations of schema by instance, ordered by where they occur.

    Raises SchemaUncheckable when the schema is not valid JSON Schema, is too large, refers
    to something that is not inside it, or holds a regular expression RE2 cannot run.
    """
    _check_shape(schema)
    try:
        _Validator.check_schema(schema, format_checker=_SCHEMA_FORMATS)
        checker = _Validator(schema, registry=LOCAL_METASCHEMAS, format_checker=_VALUE_FORMATS)
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
