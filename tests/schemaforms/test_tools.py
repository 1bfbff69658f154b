"""The Run form built from a tool's inputSchema (PROTOCOL.md §3.1), driven like a browser."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tasksapp.demoserver.tools import TOOLS, TOOLS_BY_NAME
from tasksapp.schemaforms.tools import NOT_SHOWN_AS_FIELDS, ToolFieldsForm, ToolJsonForm, tool_form
from tests.support.forms import browser_submit

FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "note": {"type": "string", "maxLength": 20},
        "when": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "home": {"type": "string", "format": "uri"},
        "n": {"type": "integer", "minimum": 1, "default": 3},
        "ratio": {"type": "number"},
        "dry_run": {"type": "boolean"},
        "confirm": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "safe"]},
        "flags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}},
    },
    "required": ["text", "confirm"],
    "additionalProperties": False,
}

NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "config": {
            "type": "object",
            "properties": {"retries": {"type": "integer", "minimum": 0}},
            "required": ["retries"],
            "default": {"retries": 2},
        },
        "label": {"type": "string", "default": "run"},
    },
    "required": ["config"],
}


def submitted(schema: Any, changes: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """The bound form after a browser submits the rendered Run form with changes."""
    html = str(tool_form(schema, **kwargs))
    return tool_form(schema, data=browser_submit(html, changes), **kwargs)


def test_flat_schema_becomes_fields() -> None:
    form = submitted(FLAT, {"text": "hi", "confirm": "on", "ratio": "0.5", "flags": ["z", "x"]})

    assert isinstance(form, ToolFieldsForm) and form.mode == "fields"
    assert list(form.fields) == list(FLAT["properties"])
    assert form.is_valid(), form.errors
    assert form.arguments() == {"text": "hi", "n": 3, "ratio": 0.5, "confirm": True, "flags": ["x", "z"]}


def test_optional_booleans_and_empty_optional_strings_are_left_out() -> None:
    form = submitted(FLAT, {"text": "hi", "n": ""})

    assert form.arguments() == {"text": "hi", "confirm": False}


def test_every_reference_server_tool_gets_fields() -> None:
    # json_schema_2020_12_tool's composition keywords are what the JSON editor is for.
    for tool in (t for t in TOOLS if t.name != "json_schema_2020_12_tool"):
        form = tool_form(tool.definition()["inputSchema"])

        assert form.mode == "fields", tool.name
        assert list(form.fields) == list(tool.properties)


def test_reference_server_slow_count_runs_with_its_defaults() -> None:
    schema = TOOLS_BY_NAME["slow_count"].definition()["inputSchema"]
    form = submitted(schema, {"n": "4"})

    assert form.is_valid(), form.errors
    assert TOOLS_BY_NAME["slow_count"].validate(form.arguments())["n"] == 4


@pytest.mark.parametrize(
    "schema",
    [
        NESTED,
        {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "object"}}}},
        {"type": "object", "properties": {"words": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
        {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
        {"type": "object", "properties": {"x": {"type": "string"}}, "allOf": [{"required": ["x"]}]},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object", "patternProperties": {"^n_": {"type": "integer"}}},
        {"type": "object", "properties": {"x": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"level": {"type": "integer", "enum": [1, 2, 3]}}},
        "not a schema",
    ],
)
def test_deeper_schemas_become_a_json_editor(schema: Any) -> None:
    form = tool_form(schema)

    assert isinstance(form, ToolJsonForm) and form.mode == "json"
    assert list(form.fields) == ["arguments_json"]
    assert form.reasons
    assert '<textarea name="arguments_json"' in str(form)


def test_json_editor_starts_from_the_schema_defaults() -> None:
    form = tool_form(NESTED)
    empty = tool_form({"type": "object", "properties": {"x": {"type": "object"}}})

    assert json.loads(form["arguments_json"].value()) == {"config": {"retries": 2}, "label": "run"}
    assert empty["arguments_json"].value() == "{}"


def test_json_editor_sends_what_was_typed_when_it_fits_the_schema() -> None:
    arguments = {"config": {"retries": 5}, "extra": [1, "two", None]}
    form = submitted(NESTED, {"arguments_json": json.dumps(arguments)})

    assert form.is_valid(), form.errors
    assert form.arguments() == arguments


def test_json_editor_left_empty_sends_an_empty_object() -> None:
    form = tool_form(
        {"type": "object", "properties": {"x": {"type": "object"}}}, data={"arguments_json": "  "}
    )

    assert form.arguments() == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"config": ', "This is not valid JSON: Expecting value: line 1 column 12 (char 11)"),
        ("[1, 2]", 'The arguments must be a JSON object, like {"name": "value"}.'),
        ('{"config": {"retries": NaN}}', "This is not valid JSON: NaN is not allowed in JSON"),
        ("[" * 100_000 + "]" * 100_000, "The JSON nests too deeply."),
    ],
)
def test_json_editor_reports_text_that_is_not_a_json_object(text: str, message: str) -> None:
    form = tool_form(NESTED, data={"arguments_json": text})

    assert not form.is_valid()
    assert form.errors == {"arguments_json": [message]}


def test_json_editor_lists_schema_violations_with_their_path() -> None:
    form = tool_form(NESTED, data={"arguments_json": '{"config": {"retries": -1}, "label": 3}'})

    assert not form.is_valid()
    assert form.errors["arguments_json"] == [
        "$.config.retries: -1 is less than the minimum of 0",
        "$.label: 3 is not of type 'string'",
    ]
    assert "$.config.retries: -1 is less than the minimum of 0" in str(form)
    assert tool_form(NESTED, data={"arguments_json": "{}"}).errors == {
        "arguments_json": ["$: 'config' is a required property"]
    }


def test_fields_are_checked_against_the_whole_schema_too() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}

    assert tool_form(schema, data={"n": "3"}).errors == {"n": ["3 is not a multiple of 2"]}


def test_invalid_field_values_are_reported_on_the_field() -> None:
    form = submitted(
        FLAT, {"text": "hi", "n": "0", "note": "x" * 21, "home": "not a uri", "when": "2026-02-30"}
    )

    assert set(form.errors) == {"n", "note", "home", "when"}


def test_initial_arguments_round_trip_through_the_fields() -> None:
    arguments = {
        "text": "again",
        "note": "short",
        "when": "2026-02-28",
        "at": "2026-05-01T14:30:15Z",
        "home": "https://example.com/x?y=1",
        "ratio": 2.5,
        "dry_run": False,
        "confirm": True,
        "mode": "safe",
        "flags": ["x", "y"],
    }
    form = submitted(FLAT, initial_arguments=arguments)

    assert form.mode == "fields"
    assert form.is_valid(), form.errors
    assert form.arguments() == arguments  # "n" was left out last time, so its default is not sent now


def test_initial_arguments_round_trip_through_the_json_editor() -> None:
    arguments = {"config": {"retries": 1}, "label": "é ✓"}
    form = submitted(NESTED, initial_arguments=arguments)

    assert json.loads(tool_form(NESTED, initial_arguments={})["arguments_json"].value()) == {}
    assert form.mode == "json"
    assert form.arguments() == arguments


@pytest.mark.parametrize(
    "arguments", [{"text": "a", "confirm": True, "unknown": 1}, {"text": 5, "confirm": True}]
)
def test_initial_arguments_no_field_can_show_switch_to_the_json_editor(arguments: dict[str, Any]) -> None:
    form = submitted(FLAT, initial_arguments=arguments)

    assert form.mode == "json"
    assert form.reasons == [NOT_SHOWN_AS_FIELDS]
    assert json.loads(tool_form(FLAT, initial_arguments=arguments)["arguments_json"].value()) == arguments
    assert not form.is_valid()  # the schema refuses them, and now the operator can see why


class _Counting(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"type": "integer"}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_refs_are_never_fetched(schema_host: str) -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": f"{schema_host}/x.json"}}}
    form = tool_form(schema, data={"arguments_json": '{"x": "not an integer"}'})

    assert form.arguments() == {"x": "not an integer"}
    assert "refers to something it does not contain" in form.warnings[0]
    assert _Counting.hits == 0


@pytest.mark.parametrize(
    ("schema", "warning"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}, "nests too deeply"),
        ({"type": "object", "properties": {"x": {"type": "strange"}}}, "not valid JSON Schema"),
        ({"type": "object", "allOf": [{"allOf": [{}] * 100}] * 600}, "too large"),
        ({"type": "object", "properties": {"x": {"allOf": [{"not": {}}]}}}, None),
    ],
)
def test_schemas_that_cannot_be_checked_leave_the_check_to_the_server(
    schema: Any, warning: str | None
) -> None:
    form = tool_form(schema, data={"arguments_json": '{"x": 1}'})

    if warning is None:
        assert not form.is_valid()
    else:
        assert form.arguments() == {"x": 1}
        assert warning in form.warnings[0]


def test_arguments_need_a_valid_form() -> None:
    with pytest.raises(ValueError, match="valid"):
        tool_form(NESTED, data={"arguments_json": "nope"}).arguments()
    with pytest.raises(ValueError, match="valid"):
        tool_form(FLAT, data={}).arguments()
