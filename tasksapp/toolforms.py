"""The "Run" form for a tool, built from the inputSchema its server chose (PROTOCOL.md §3.1).

A flat schema becomes one field per property (the same fields as an elicitation form);
anything deeper becomes a JSON editor checked against the whole schema, so no tool is
out of reach and no argument is silently dropped.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.elicitation import SchemaForm
from tasksapp.schemacheck import SchemaUncheckable, issue_text, schema_issues
from tasksapp.schemafields import MAX_FIELDS, JsonObject, clip, flat_fields, initial_from

MAX_JSON = 512_000
NOT_SHOWN_AS_FIELDS = "the arguments to run again include values no field can show"


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
        reasons = built.problems or [NOT_SHOWN_AS_FIELDS]
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
