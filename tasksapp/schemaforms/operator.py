"""A scripted operator: answers what servers ask the way a person at the dashboard would.

It fills the dashboard's own forms (schemaforms.elicitation, schemaforms.tools): defaults stay
as the form shows them, required fields get what a person would type, and the answer is whatever
the form's validation produces, exactly as the inbox and the Run page send it. The official
conformance suite's client runs (tasksapp.conformance) answer through it, so they
exercise the dashboard's answering code, not a hand-written reply.
"""

from __future__ import annotations

import os
from typing import Any

from tasksapp.mcpclient import InputRequest, Tool

JsonObject = dict[str, Any]
TYPED_TEXT = "conformance"
DEFAULT_ROOTS = [{"uri": "file:///srv/projects", "name": "Projects"}]


def _django() -> None:
    """The forms need Django's settings (no database); configure them once, for this process."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()


class ScriptedOperator:
    def __init__(self, *, roots: list[JsonObject] | None = None) -> None:
        _django()
        self.roots = roots if roots is not None else DEFAULT_ROOTS

    def answer(self, request: InputRequest) -> JsonObject:
        """The response to one input request (elicitation, sampling or roots), as the UI builds it."""
        from tasksapp.schemaforms import elicitation

        params = request.params
        if request.method == "roots/list":
            return elicitation.roots_result(self.roots)
        if request.method == "sampling/createMessage":
            reply = {"text": "Paris.", "model": "", "stop_reason": "endTurn"}
            sampling = elicitation.sampling_form(params, data=reply)
            return sampling.result() if sampling.is_valid() else {"action": "decline"}
        if request.method != "elicitation/create":
            raise ValueError(f"the dashboard cannot answer {request.method!r}")
        if params.get("mode") == "url":
            return {"action": "accept"}  # the person agreed to open the link (§6.2)
        schema = params.get("requestedSchema")
        typed = _typed(elicitation.elicitation_form(schema))
        form = elicitation.elicitation_form(schema, data=typed)
        if form.unsupported or not form.is_valid():
            return {"action": "decline"}  # what a person does with a form the UI cannot show
        return {"action": "accept", "content": form.content()}

    def arguments(self, tool: Tool) -> JsonObject:
        """A tool's arguments from its Run form, with every required field filled in."""
        from tasksapp.schemaforms.tools import ToolFieldsForm, tool_form

        shown = tool_form(tool.input_schema)
        if not isinstance(shown, ToolFieldsForm):
            return {}  # the JSON editor starts from a skeleton; a person would send {} first
        form = tool_form(tool.input_schema, data=_typed(shown))
        if not isinstance(form, ToolFieldsForm) or not form.is_valid():
            raise ValueError(f"the Run form of {tool.name!r} refused what a person would type: {form.errors}")
        return form.arguments()


def _typed(form: Any) -> dict[str, Any]:
    """What a person leaves in (the initial values) and types in (every empty required field)."""
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form.get_initial_for_field(field, name)
        if value in (None, "", []) and (field.required or _is_yes_no(field)):
            value = _typical(field)
        if value in (None, "", []) or value is False:
            continue
        data[form.add_prefix(name)] = _as_posted(value)
    return data


def _is_yes_no(field: Any) -> bool:
    return [value for value, _ in getattr(field, "choices", [])] == ["", "true", "false"]


def _typical(field: Any) -> Any:
    from django import forms

    if isinstance(field, forms.BooleanField):
        return True
    choices: list[Any] = [value for value, _ in getattr(field, "choices", [])]
    if isinstance(field, forms.MultipleChoiceField):
        return choices[: max(1, getattr(field, "min_items", None) or 1)]
    if isinstance(field, forms.ChoiceField):
        return next((value for value in choices if value not in ("", "false")), "")
    if isinstance(field, forms.IntegerField | forms.FloatField):
        low = field.min_value
        return low if low is not None else 1
    if isinstance(field, forms.EmailField):
        return "operator@example.com"
    if isinstance(field, forms.DateField) or "Date" in type(field).__name__:
        return "2026-07-28" if isinstance(field, forms.DateField) else "2026-07-28T09:00:00Z"
    length = getattr(field, "min_length", None) or 0
    return TYPED_TEXT.ljust(length, "x")


def _as_posted(value: Any) -> Any:
    if value is True:
        return "on"
    if isinstance(value, list):
        return [str(item) for item in value]
    return str(value)
