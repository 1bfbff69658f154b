"""A server's regular expressions never run on a backtracking engine.

These run in the test process: on the old code (Python's `re`) each of the first three would
hold the process for hours. tests/security/test_hostile_web.py shows the web process staying responsive.
"""

from typing import Any

import pytest

from tasksapp.schemaforms.check import SchemaUncheckable, schema_issues
from tasksapp.schemaforms.elicitation import elicitation_form
from tasksapp.schemaforms.tools import ToolJsonForm, tool_form

EVIL = "^(a+)+$"
KEY = "a" * 40 + "!"


def messages(schema: Any, instance: Any) -> list[str]:
    return [issue.message for issue in schema_issues(schema, instance)]


def test_pattern_properties_with_additional_properties_false() -> None:
    schema = {
        "type": "object",
        "patternProperties": {EVIL: {"type": "integer"}},
        "additionalProperties": False,
    }

    assert messages(schema, {KEY: 1}) == [f"'{KEY}' does not match any of the regexes: '{EVIL}'"]


def test_pattern_properties_alone() -> None:
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}

    assert messages(schema, {KEY: "x", "aaaa": "y"}) == ["'y' is not of type 'integer'"]


def test_property_names_and_pattern() -> None:
    assert messages({"propertyNames": {"pattern": EVIL}}, {KEY: 1}) == [f"'{KEY}' does not match '{EVIL}'"]
    assert messages({"properties": {"x": {"type": "string", "pattern": EVIL}}}, {"x": KEY}) == [
        f"'{KEY}' does not match '{EVIL}'"
    ]


def test_the_tool_form_reports_the_key_to_the_operator() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "default": 1}},
        "patternProperties": {EVIL: {"type": "integer"}},
        "additionalProperties": False,
    }
    form = tool_form(schema, data={"arguments_json": f'{{"{KEY}": 1}}'})

    assert isinstance(form, ToolJsonForm) and not form.is_valid()
    assert form.errors["arguments_json"] == [f"$: '{KEY}' does not match any of the regexes: '{EVIL}'"]


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"properties": {"x": {"pattern": "(a)\\1"}}}, "uses features the dashboard does not run"),
        ({"properties": {"x": {"pattern": "(?=a)a"}}}, "uses features the dashboard does not run"),
        ({"properties": {"x": {"pattern": "a" * 5000}}}, "too long to check here"),
        (
            {"patternProperties": {EVIL: {}}, "unevaluatedProperties": False},
            "combines unevaluatedProperties with patternProperties",
        ),
    ],
)
def test_what_re2_cannot_run_is_left_to_the_server_and_said(schema: Any, said: str) -> None:
    with pytest.raises(SchemaUncheckable, match=said):
        schema_issues(schema, {"x": "aa", KEY: 1})
    form = tool_form({"type": "object", **schema}, data={"arguments_json": '{"x": "aa"}'})
    assert form.is_valid() and said in form.warnings[0]


def test_a_format_regex_value_is_compiled_by_re2() -> None:
    schema = {"properties": {"p": {"type": "string", "format": "regex"}}}

    assert messages(schema, {"p": "^(a+)+$"}) == []
    assert messages(schema, {"p": "(a)\\1"}) == ["'(a)\\\\1' is not a 'regex'"]


def test_elicitation_pattern_is_checked() -> None:
    form = elicitation_form({"properties": {"code": {"type": "string", "pattern": EVIL}}}, data={"code": KEY})

    assert form.errors == {"code": [f"'{KEY}' does not match '{EVIL}'"]}
