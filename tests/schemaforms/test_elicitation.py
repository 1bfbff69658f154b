"""Answer forms for input requests (PROTOCOL.md §6), driven the way a browser submits them."""

from typing import Any

import pytest

from tasksapp.demoserver.tools.schemas import (
    COLOR_FORM,
    CONTACT_FORM,
    COUNT_FORM,
    HOSTILE_FORM,
    NAME_FORM,
    SAMPLING_REQUEST,
)
from tasksapp.schemaforms.elicitation import (
    elicitation_form,
    looks_like_secret,
    roots_result,
    sampling_form,
    sampling_summary,
    url_request_view,
)
from tests.support.forms import browser_submit

SPEC_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Full name", "minLength": 1, "maxLength": 100},
        "email": {"type": "string", "format": "email", "description": "Work address"},
        "age": {"type": "integer", "minimum": 18, "maximum": 130, "default": 30},
        "agree": {"type": "boolean", "title": "Accept terms", "default": False},
        "plan": {"type": "string", "enum": ["free", "pro"], "default": "free"},
        "color": {
            "type": "string",
            "oneOf": [{"const": "#FF0000", "title": "Red"}, {"const": "#00FF00", "title": "Green"}],
        },
        "tags": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "default": ["a"],
        },
        "teams": {
            "type": "array",
            "items": {"anyOf": [{"const": "t1", "title": "Team One"}, {"const": "t2", "title": "Team Two"}]},
        },
    },
    "required": ["name", "email"],
}

CONTACT_ANSWERS = {"name": "Ada", "email": "ada@example.com"}


def submitted(schema: Any, changes: dict[str, Any] | None = None) -> Any:
    """The bound form after a browser submits the rendered form with changes."""
    return elicitation_form(schema, data=browser_submit(str(elicitation_form(schema)), changes))


# Form mode (§6.1)


def test_spec_example_form_answers_with_the_spec_example_content() -> None:
    changes = {"name": "Ada", "email": "ada@example.com", "age": "36", "agree": "true", "plan": "pro"}
    form = submitted(SPEC_SCHEMA, changes | {"color": "#FF0000", "teams": ["t2"]})

    assert form.is_valid(), form.errors
    assert form.content() == {
        "name": "Ada",
        "email": "ada@example.com",
        "age": 36,
        "agree": True,
        "plan": "pro",
        "color": "#FF0000",
        "tags": ["a"],
        "teams": ["t2"],
    }


def test_reference_server_contact_form_renders_every_field() -> None:
    form = elicitation_form(CONTACT_FORM)
    html = str(form)

    assert not form.unsupported
    assert list(form.fields) == list(CONTACT_FORM["properties"])
    for name, widget in [
        ("name", 'type="text"'),
        ("email", 'type="email"'),
        ("website", 'type="url"'),
        ("birthday", 'type="date"'),
        ("meeting", 'type="datetime-local"'),
        ("budget", 'type="number"'),
        ("age", 'type="number"'),
        ("tags", 'type="checkbox"'),
        ("teams", 'type="checkbox"'),
    ]:
        assert f'{widget} name="{name}"' in html
    for name in ("agree", "plan", "color", "size"):
        assert f'<select name="{name}"' in html


@pytest.mark.parametrize("schema", [CONTACT_FORM, NAME_FORM, COLOR_FORM, COUNT_FORM, HOSTILE_FORM])
def test_every_reference_server_form_renders_all_its_fields(schema: dict[str, Any]) -> None:
    form = elicitation_form(schema)
    html = str(form)

    assert not form.unsupported and not form.errors
    for name in schema["properties"]:
        assert f'name="{name}"' in html


def test_defaults_pre_fill_the_form_and_are_sent_when_left_alone() -> None:
    html = str(elicitation_form(CONTACT_FORM))
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS)

    assert 'name="nickname" value="Ace"' in html
    assert 'name="age" value="30"' in html
    assert '<option value="#00FF00" selected>Green</option>' in html
    assert 'value="alpha" id="id_tags_0" checked' in html
    assert form.is_valid(), form.errors
    assert form.content() == CONTACT_ANSWERS | {
        "nickname": "Ace",
        "age": 30,
        "agree": False,
        "plan": "free",
        "color": "#00FF00",
        "size": "m",
        "tags": ["alpha"],
        "teams": ["t2"],
    }


def test_required_fields_are_marked_and_enforced() -> None:
    form = submitted(CONTACT_FORM, {"name": "", "email": ""})

    assert [name for name, field in elicitation_form(CONTACT_FORM).fields.items() if field.required] == [
        "name",
        "email",
        "plan",
    ]
    assert not form.is_valid()
    assert set(form.errors) == {"name", "email"}


def test_formats_clean_to_their_wire_strings() -> None:
    answers = CONTACT_ANSWERS | {"website": "urn:isbn:0451450523", "birthday": "1990-02-03"}
    form = submitted(CONTACT_FORM, answers | {"meeting": "2026-05-01T14:30", "budget": "12.5"})

    assert form.is_valid(), form.errors
    content = form.content()
    assert content["website"] == "urn:isbn:0451450523"
    assert content["birthday"] == "1990-02-03"
    assert content["meeting"] == "2026-05-01T14:30:00Z"
    assert content["budget"] == 12.5


def test_date_time_keeps_an_explicit_offset_and_shows_defaults_in_utc() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"at": {"type": "string", "format": "date-time"}},
    }
    form = elicitation_form(schema, data={"at": "2026-05-01T14:30:00+02:00"})
    defaulted = {"properties": {"at": schema["properties"]["at"] | {"default": "2026-05-01T14:30:00+02:00"}}}

    assert form.is_valid(), form.errors
    assert form.content() == {"at": "2026-05-01T14:30:00+02:00"}
    assert 'value="2026-05-01T12:30:00"' in str(elicitation_form(defaulted))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("email", "not-an-address"),
        ("website", "relative/path"),
        ("website", "https://exa mple.com"),
        ("website", "https://example.com/%zz"),
        ("birthday", "2026-13-01"),
        ("meeting", "tomorrow"),
        ("budget", "lots"),
        ("budget", "nan"),
    ],
)
def test_bad_formats_are_reported_on_their_field(name: str, value: str) -> None:
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {name: value})

    assert not form.is_valid()
    assert list(form.errors) == [name]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("age", "17"),
        ("age", "131"),
        ("age", "30.5"),
        ("budget", "-1"),
        ("budget", "10000.6"),
        ("name", "x" * 101),
    ],
)
def test_min_and_max_violations_are_reported_on_the_field(name: str, value: str) -> None:
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {name: value})

    assert not form.is_valid()
    assert list(form.errors) == [name]


def test_multi_select_enforces_item_limits_only_when_answered() -> None:
    too_many = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"tags": ["alpha", "beta", "gamma"]})
    none = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"tags": None, "teams": None})
    required = {"properties": {"pick": SPEC_SCHEMA["properties"]["tags"]}, "required": ["pick"]}
    required_empty = elicitation_form(required, data={})

    assert too_many.errors == {"tags": ["Choose at most 2."]}
    assert none.is_valid(), none.errors
    assert "tags" not in none.content() and "teams" not in none.content()
    assert required_empty.errors == {"pick": ["Choose at least 1."]}
    assert elicitation_form(required, data={"pick": ["c", "a"]}).content() == {"pick": ["a", "c"]}


def test_multi_select_refuses_values_that_are_not_offered() -> None:
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"teams": ["t9"]})

    assert not form.is_valid()
    assert list(form.errors) == ["teams"]


def test_optional_boolean_left_untouched_sends_nothing() -> None:
    schema = {"type": "object", "properties": {"flag": {"type": "boolean", "title": "Flag"}}}
    html = str(elicitation_form(schema))

    assert "— (not answered)" in html
    assert submitted(schema).content() == {}
    assert submitted(schema, {"flag": "false"}).content() == {"flag": False}
    assert submitted(schema, {"flag": "true"}).content() == {"flag": True}


def test_required_boolean_is_a_checkbox_whose_unticked_state_answers_false() -> None:
    schema = {"properties": {"ok": {"type": "boolean", "default": True}}, "required": ["ok"]}
    html = str(elicitation_form(schema))

    assert 'type="checkbox" name="ok"' in html and "checked" in html
    assert " required" not in html
    assert submitted(schema).content() == {"ok": True}
    assert submitted(schema, {"ok": None}).content() == {"ok": False}


def test_untouched_optional_text_is_left_out() -> None:
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"nickname": ""})

    assert form.is_valid(), form.errors
    assert "nickname" not in form.content() and "website" not in form.content()


def test_legacy_enum_names_label_the_choices() -> None:
    html = str(elicitation_form(CONTACT_FORM))

    assert '<option value="s">Small</option>' in html
    assert '<option value="l">Large</option>' in html
    assert submitted(CONTACT_FORM, CONTACT_ANSWERS | {"size": "l"}).content()["size"] == "l"


def test_titled_one_of_and_any_of_label_the_choices() -> None:
    html = str(elicitation_form(CONTACT_FORM))
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"color": "#0000FF", "teams": ["t1", "t3"]})

    assert '<option value="#FF0000">Red</option>' in html
    assert 'value="t3" id="id_teams_2">\n Team Three</label>' in html
    assert form.content()["color"] == "#0000FF"
    assert form.content()["teams"] == ["t1", "t3"]


def test_single_select_refuses_a_value_that_is_not_offered() -> None:
    form = submitted(CONTACT_FORM, CONTACT_ANSWERS | {"color": "#123456"})

    assert list(form.errors) == ["color"]


@pytest.mark.parametrize(
    ("prop", "schema"),
    [
        ("address", {"type": "object", "properties": {"city": {"type": "string"}}}),
        ("people", {"type": "array", "items": {"type": "object"}}),
        ("either", {"anyOf": [{"type": "string"}, {"type": "integer"}]}),
        ("linked", {"$ref": "#/$defs/thing"}),
        ("count", {"type": "integer", "enum": [1, 2]}),
        ("maybe", {"type": ["string", "null"]}),
        ("words", {"type": "array", "items": {"type": "string"}}),
    ],
)
def test_shapes_outside_the_subset_are_flagged_not_crashing(prop: str, schema: dict[str, Any]) -> None:
    full = {"type": "object", "properties": {"name": {"type": "string"}, prop: schema}}
    message = f"This server asked for a field the dashboard cannot render safely: {prop}"
    unbound, bound = elicitation_form(full), elicitation_form(full, data={"name": "x"})

    assert unbound.unsupported and bound.unsupported
    assert unbound.non_field_errors() == [message]
    assert not bound.is_valid()
    assert bound.non_field_errors() == [message]
    assert "name" in unbound.fields


@pytest.mark.parametrize(
    "schema",
    [
        None,
        "form",
        7,
        [],
        {"type": "array"},
        {"properties": []},
        {"properties": {"a": None}},
        {"properties": {"": {"type": "string"}}},
        {"properties": {"a": {"type": "string", "enum": []}}},
        {"properties": {"a": {"type": "string", "oneOf": [{"title": "no const"}]}}},
        {"properties": {"a": {"type": "string"}}, "allOf": [{"required": ["a"]}]},
        {"properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]},
        {"properties": {f"f{i}": {"type": "string"} for i in range(101)}},
        {"properties": {"x" * 201: {"type": "string"}}},
    ],
)
def test_garbage_schemas_are_flagged_not_crashing(schema: Any) -> None:
    form = elicitation_form(schema, data={"a": "x"})

    assert str(form)
    assert form.unsupported
    assert not form.is_valid()
    assert form.non_field_errors()


def test_odd_but_harmless_keywords_fall_back_without_crashing() -> None:
    schema = {
        "properties": {
            "a": {
                "type": "string",
                "title": 5,
                "description": ["x"],
                "minLength": "3",
                "maxLength": -1,
                "default": 7,
            }
        },
        "required": ["a", 3],
    }
    form = elicitation_form(schema, data={"a": "x"})

    assert form.fields["a"].label == "a"
    assert form.is_valid(), form.errors
    assert form.content() == {"a": "x"}
    assert form.warnings and "not valid JSON Schema" in form.warnings[0]


def test_schema_checks_the_fields_cannot_express_land_on_their_field() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "integer", "multipleOf": 5},
            "id": {"type": "string", "format": "uuid"},
        },
        "minProperties": 2,
    }

    assert elicitation_form(schema, data={"code": "7"}).errors == {
        "code": ["7 is not a multiple of 5"],
        "__all__": ["{'code': 7} does not have enough properties"],
    }
    assert list(elicitation_form(schema, data={"code": "5", "id": "nope"}).errors) == ["id"]
    assert elicitation_form(
        schema, data={"code": "5", "id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}
    ).is_valid()


def test_server_regular_expressions_run_in_linear_time() -> None:
    schema = {"properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}

    form = elicitation_form(schema, data={"a": "a" * 40 + "!"})

    assert form.errors == {"a": ["'" + "a" * 40 + "!' does not match '^(a+)+$'"]}
    assert elicitation_form(schema, data={"a": "a" * 40}).content() == {"a": "a" * 40}


def test_a_pattern_re2_cannot_run_is_left_to_the_server_with_a_warning() -> None:
    schema = {"properties": {"a": {"type": "string", "pattern": "^(a)\\1$"}}}

    form = elicitation_form(schema, data={"a": "ab"})

    assert form.content() == {"a": "ab"}
    assert form.warnings and "uses features the dashboard does not run" in form.warnings[0]


def test_content_needs_a_valid_form() -> None:
    with pytest.raises(ValueError, match="valid"):
        elicitation_form(CONTACT_FORM, data={}).content()


def test_prefixes_keep_two_forms_on_one_page_apart() -> None:
    schema = {"properties": {"name": {"type": "string"}}}
    data = {"one-name": "Ada", "two-name": "Grace"}

    one = elicitation_form(schema, data=data, prefix="one")
    two = elicitation_form(schema, data=data, prefix="two")

    assert one.content() == {"name": "Ada"}
    assert two.content() == {"name": "Grace"}


def test_hostile_titles_descriptions_and_options_are_escaped() -> None:
    html = str(elicitation_form(HOSTILE_FORM))

    assert "<script" not in html and "<b " not in html and "<img" not in html
    assert "&lt;img src=x onerror=alert(&quot;description&quot;)&gt;" in html
    assert "&lt;b onmouseover=alert(&quot;field&quot;)&gt;Answer&lt;/b&gt;" in html


def test_secret_looking_fields_are_named() -> None:
    schema = {
        "properties": {
            "password": {"type": "string"},
            "apiKey": {"type": "string"},
            "card": {"type": "string", "title": "Card number"},
            "gh": {"type": "string", "description": "Your GitHub personal access token"},
            "hidden": {"type": "string", "format": "password"},
            "nickname": {"type": "string", "title": "Nickname", "description": "Pass it on"},
        }
    }

    assert looks_like_secret(schema) == ["password", "apiKey", "card", "gh", "hidden"]
    assert elicitation_form(schema).secret_fields == looks_like_secret(schema)
    assert looks_like_secret(CONTACT_FORM) == []
    assert looks_like_secret("garbage") == [] and looks_like_secret({"properties": 3}) == []


# URL mode (§6.2)


def test_https_link_is_offered_with_its_host() -> None:
    view = url_request_view({"mode": "url", "url": "https://mcp.example.com/ui/set_api_key", "message": "Go"})

    assert view == {
        "ok": True,
        "url": "https://mcp.example.com/ui/set_api_key",
        "scheme": "https",
        "host": "mcp.example.com",
        "host_display": "mcp.example.com",
        "insecure": False,
        "message": "Go",
        "reason": "",
    }


def test_plain_http_link_is_offered_but_marked_insecure() -> None:
    view = url_request_view({"url": "http://127.0.0.1:8000/step"})

    assert view["ok"] and view["insecure"] and view["host"] == "127.0.0.1"


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "/relative/path",
        "//evil.example/x",
        "ftp://files.example.com/",
        "https://",
        "https://mcp.example.com@evil.example/",
        "https://exa mple.com/",
        "https://example.com/\u202egnp.exe",
        "https://example.com:99999/",
        "",
        None,
        42,
        "https://example.com/" + "a" * 5000,
    ],
)
def test_links_that_are_not_plain_web_addresses_are_refused(url: object) -> None:
    view = url_request_view({"url": url, "message": "Click"})

    assert view["ok"] is False
    assert view["reason"]
    assert view["url"] == ""
    assert view["message"] == "Click"


def test_international_hosts_show_both_forms() -> None:
    punycode = url_request_view({"url": "https://xn--bcher-kva.example/path"})
    unicode = url_request_view({"url": "https://bücher.example/path"})

    for view in (punycode, unicode):
        assert view["ok"], view["reason"]
        assert view["host"] == "xn--bcher-kva.example"
        assert view["host_display"] == "bücher.example"


def test_url_request_tolerates_garbage_params() -> None:
    assert url_request_view(None)["ok"] is False
    assert url_request_view({"url": "https://a.example/", "message": {"x": 1}})["message"] == ""
    assert len(url_request_view({"url": "https://a.example/", "message": "m" * 10_000})["message"]) == 4000


# Sampling (§6.3)


def test_sampling_reply_becomes_a_create_message_result() -> None:
    unbound = sampling_form(SAMPLING_REQUEST["params"])
    form = sampling_form(SAMPLING_REQUEST["params"], data=browser_submit(str(unbound), {"text": "Paris"}))

    assert 'value="human-operator"' in str(unbound)
    assert form.result() == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "human-operator",
        "stopReason": "endTurn",
    }


def test_sampling_reply_needs_text_and_a_known_stop_reason() -> None:
    form = sampling_form({}, data={"text": "", "model": "me", "stop_reason": "toolUse"})

    assert set(form.errors) == {"text", "stop_reason"}
    assert sampling_form({}, data={"text": "x", "model": "", "stop_reason": "maxTokens"}).result()[
        "model"
    ] == ("human-operator")


def test_sampling_summary_shows_the_request_as_plain_strings() -> None:
    summary = sampling_summary(SAMPLING_REQUEST["params"])

    assert summary["messages"] == [{"role": "user", "text": "What is the capital of France? One word."}]
    assert summary["system_prompt"] == "You are a terse geography assistant."
    assert summary["max_tokens"] == "100"
    assert summary["temperature"] == "0.2"
    assert summary["model_hints"] == ["claude-3-sonnet"]
    assert summary["omitted_messages"] == 0


def test_sampling_summary_describes_non_text_blocks() -> None:
    content = [
        {"type": "text", "text": "Look:"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        {"type": "tool_use", "id": "u1", "name": "search", "input": {}},
        {"type": "tool_result", "toolUseId": "u1", "content": []},
        {"type": "resource_link"},
        "garbage",
    ]
    summary = sampling_summary({"messages": [{"role": "assistant", "content": content}], "maxTokens": True})

    assert summary["messages"][0]["text"] == (
        "Look:\n\n[image image/png]\n\n[audio audio/wav]\n\n[tool_use search]\n\n"
        "[tool_result u1]\n\n[resource_link]\n\n[unreadable content]"
    )
    assert summary["max_tokens"] == ""


def test_sampling_summary_is_bounded_and_tolerates_garbage() -> None:
    long = {"role": "user", "content": {"type": "text", "text": "x" * 50_000}}
    summary = sampling_summary({"messages": [long] * 60, "systemPrompt": 3, "modelPreferences": "fast"})

    assert len(summary["messages"]) == 50 and summary["omitted_messages"] == 10
    assert len(summary["messages"][0]["text"]) == 8000
    assert summary["system_prompt"] == "" and summary["model_hints"] == []
    assert sampling_summary(None)["messages"] == []


# Roots (§6.4)


def test_roots_keep_only_valid_file_uris() -> None:
    roots = [
        {"uri": "file:///home/user/projects/myproject", "name": "My Project"},
        {"uri": "file://server/share/docs", "name": 5},
        {"uri": "file:///home/user/projects/myproject", "name": "duplicate"},
        {"uri": "https://example.com/repo"},
        {"uri": "file:relative/path"},
        {"uri": "file:///with space"},
        {"uri": "FILE:///upper"},
        {"uri": "file:///x?query=1"},
        {"name": "no uri"},
        "file:///not-an-object",
    ]

    assert roots_result(roots) == {
        "roots": [
            {"uri": "file:///home/user/projects/myproject", "name": "My Project"},
            {"uri": "file://server/share/docs"},
        ]
    }
    assert roots_result("garbage") == {"roots": []}
