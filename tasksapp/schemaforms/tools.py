"""The "Run" form for a tool, built from the inputSchema its server chose (PROTOCOL.md §3.1).

A flat schema becomes one field per property (the same fields as an elicitation form);
anything deeper becomes a JSON editor checked against the whole schema, so no tool is
out of reach and no argument is silently dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.schemaforms.check import SchemaUncheckable, issue_text, schema_issues
from tasksapp.schemaforms.elicitation import SchemaForm
from tasksapp.schemaforms.fields import MAX_FIELDS, JsonObject, clip, flat_fields, initial_from

MAX_JSON = 512_000
MAX_SCHEMA_SHOWN = 20_000
NOT_SHOWN_AS_FIELDS = gettext_lazy("the arguments to run again include values no field can show")


class ToolFieldsForm(SchemaForm):
    """One field per property of a flat inputSchema."""

    mode = "fields"

    def arguments(self) -> JsonObject:
        """The tools/call arguments: answered fields only (untouched optional ones left out)."""
        return self.content()


class ToolJsonForm(forms.Form):
    """A JSON editor for the arguments, for schemas the field mapping cannot express.

    `reasons` says why the fields could not be used; `warnings` when the schema could not
    be used to check the arguments (the server will check them).
    """

    mode = "json"
    arguments_json = forms.CharField(
        label=gettext_lazy("Arguments (JSON)"),
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        max_length=MAX_JSON,
        required=False,
        strip=False,
    )

    def __init__(
        self,
        input_schema: object,
        *,
        reasons: list[str],
        initial_arguments: JsonObject | None = None,
        data: Any = None,
        prefix: str | None = None,
    ) -> None:
        text = _pretty(initial_arguments) if initial_arguments is not None else _skeleton(input_schema)
        super().__init__(data=data, prefix=prefix, initial={"arguments_json": text or "{}"})
        self.schema = input_schema
        self.reasons = reasons
        self.warnings: list[str] = []

    def outline(self) -> list[SchemaRow]:
        """The schema's top-level arguments as a person reads them: name, type, required or not,
        description and default (clipped; the template escapes them)."""
        schema = self.schema if isinstance(self.schema, dict) else {}
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return []
        listed = schema.get("required")
        required = {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()
        return [
            SchemaRow(
                name=clip(str(name), 100),
                type=_type_text(prop),
                required=name in required,
                description=clip(str(prop.get("description", "")), 300) if isinstance(prop, dict) else "",
                default=clip(_compact(prop["default"]), 200)
                if isinstance(prop, dict) and "default" in prop
                else "",
            )
            for name, prop in islice(properties.items(), MAX_FIELDS)
        ]

    def required_missing_from_properties(self) -> list[str]:
        """Required names the schema lists without describing them (they still have to be sent)."""
        schema = self.schema if isinstance(self.schema, dict) else {}
        listed, properties = schema.get("required"), schema.get("properties")
        described = properties.keys() if isinstance(properties, dict) else set()
        names = [name for name in listed if isinstance(name, str)] if isinstance(listed, list) else []
        return [clip(name, 100) for name in names if name not in described][:MAX_FIELDS]

    def schema_text(self) -> str:
        """The whole inputSchema, indented (cut at MAX_SCHEMA_SHOWN characters)."""
        text = _pretty(self.schema)
        return text if len(text) <= MAX_SCHEMA_SHOWN else text[:MAX_SCHEMA_SHOWN] + "\n…"

    def clean_arguments_json(self) -> JsonObject:
        arguments = parse_arguments(self.cleaned_data["arguments_json"])
        try:
            issues = schema_issues(self.schema, arguments)
        except SchemaUncheckable as exc:
            self.warnings.append(str(exc))
            return arguments
        if issues:
            raise ValidationError([f"{issue.json_path}: {issue_text(issue)}" for issue in issues])
        return arguments

    def arguments(self) -> JsonObject:
        """The tools/call arguments: the JSON object typed in, checked against the schema."""
        if not self.is_valid():
            raise ValueError("arguments() needs a bound form that is valid")
        arguments: JsonObject = self.cleaned_data["arguments_json"]
        return arguments


ToolForm = ToolFieldsForm | ToolJsonForm


@dataclass(frozen=True)
class SchemaRow:
    name: str
    type: str
    required: bool
    description: str
    default: str


def _type_text(prop: object) -> str:
    """'string', 'integer or null', 'object', 'one of 3 shapes', 'any'."""
    if not isinstance(prop, dict):
        return "any"
    kind = prop.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " or ".join(str(item) for item in kind[:5])
    for keyword in ("oneOf", "anyOf"):
        if isinstance(prop.get(keyword), list):
            return f"{keyword} ({len(prop[keyword])})"
    if "enum" in prop:
        return "enum"
    if "$ref" in prop:
        return f"$ref {clip(str(prop['$ref']), 60)}"
    return "any"


def _compact(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def tool_form(
    input_schema: object,
    *,
    data: Any = None,
    initial_arguments: JsonObject | None = None,
    prefix: str | None = None,
) -> ToolForm:
    """The Run form: fields for a flat schema, else a JSON editor; initial_arguments pre-fill either."""
    built = flat_fields(input_schema)
    shown = initial_from(built.fields, initial_arguments or {}) if not built.problems else None
    if shown is None:
        reasons = built.problems or [str(NOT_SHOWN_AS_FIELDS)]
        return ToolJsonForm(
            input_schema, reasons=reasons, initial_arguments=initial_arguments, data=data, prefix=prefix
        )
    if initial_arguments is not None:  # run again exactly: fields left out last time stay empty
        shown = dict.fromkeys(built.fields) | shown
    return ToolFieldsForm(input_schema, built=built, initial=shown, data=data, prefix=prefix)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed in JSON")


def parse_arguments(text: str) -> JsonObject:
    """The JSON object in text ("" means {}); raises ValidationError saying what is wrong."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise ValidationError(_("The JSON nests too deeply."), code="invalid") from exc
    except ValueError as exc:
        raise ValidationError(
            _("This is not valid JSON: %(error)s") % {"error": clip(str(exc), 200)}, code="invalid"
        ) from exc
    if not isinstance(value, dict):
        raise ValidationError('The arguments must be a JSON object, like {"name": "value"}.', code="invalid")
    return value


def _pretty(value: object) -> str:
    """Indented JSON for the editor; "" when the value is not JSON or too large to show."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ""
    return text if len(text) <= MAX_JSON else ""


def _skeleton(input_schema: object) -> str:
    """The top-level defaults of the schema as JSON, the editor's starting point."""
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    if not isinstance(properties, dict):
        return "{}"
    defaults = {
        name: prop["default"]
        for name, prop in islice(properties.items(), MAX_FIELDS)
        if isinstance(prop, dict) and "default" in prop
    }
    return _pretty(defaults) or "{}"
