"""A form renderer that writes Django's commonest widgets and error lists in Python (settings.FORM_RENDERER).

Every field a form shows is two renders through Django's form templates: its widget
(`django/forms/widgets/input.html` and its kin, `select.html`, `textarea.html`) and its error list
(`django/forms/errors/list/default.html`, rendered even when it is empty). Each render costs the
template engine's context, includes and filters: the inbox, a page of 10 questions with about 50
fields, spent a third of its time there (docs/benchmarks.md, *Pages beside their SQL*).

`Renderer` writes those templates' output itself, byte for byte what the templates write: values
escaped as autoescape does (`conditional_escape`: a SafeString is left as it is), values shown with
`{{ … }}` localized as the template engine localizes them (`render_value_in_context`), and the
result stripped as BaseRenderer.render strips it. Any other template (a radio or checkbox group, a
whole form, a formset) goes through Django's templates as before. Templates are written here only while
those Django would load are its own: an app that overrides one keeps its override.
`tests/lib/test_widgets.py` compares both renderers on every widget kind, hostile values included.
"""

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import django.forms
from django.forms.renderers import DjangoTemplates
from django.template import Context
from django.template.base import render_value_in_context
from django.utils.html import escape
from django.utils.safestring import SafeData

_FORMS = "django/forms/"
# The widget templates that are `{% include "django/forms/widgets/input.html" %}` and nothing else.
_INPUTS = [
    "checkbox",
    "color",
    "date",
    "datetime",
    "email",
    "file",
    "hidden",
    "input",
    "number",
    "password",
    "search",
    "tel",
    "text",
    "time",
    "url",
]
_INCLUDE_INPUT = '{% include "django/forms/widgets/input.html" %}\n'
_OWN = Path(django.forms.__file__).parent / "templates"


def _safe(value: Any) -> str:
    """`{{ value|stringformat:'s' }}`: the value as "%s", escaped unless it is safe already."""
    text = "%s" % (str(value) if isinstance(value, tuple) else value)
    return text if isinstance(value, SafeData) else escape(text)


class _Shown:
    """`{{ value }}`: as the template engine shows a value (localized, then escaped)."""

    def __init__(self) -> None:
        self.context = Context(autoescape=True)

    def __call__(self, value: Any) -> str:
        return str(render_value_in_context(value, self.context))


_shown = _Shown()


def _attrs(attrs: dict[str, Any]) -> str:
    """attrs.html."""
    out = []
    for name, value in attrs.items():
        if value is False:
            continue
        out.append(f" {_shown(name)}" if value is True else f' {_shown(name)}="{_safe(value)}"')
    return "".join(out)


def _input(widget: dict[str, Any]) -> str:
    """input.html, with its newline (an include keeps it; the outermost render strips it)."""
    value = widget["value"]
    shown = f' value="{_safe(value)}"' if value is not None else ""
    kind, name = _shown(widget["type"]), _shown(widget["name"])
    return f'<input type="{kind}" name="{name}"{shown}{_attrs(widget["attrs"])}>\n'


def _textarea(widget: dict[str, Any]) -> str:
    value = widget["value"]
    return (
        f'<textarea name="{_shown(widget["name"])}"{_attrs(widget["attrs"])}>\n'
        f"{_shown(value) if value else ''}</textarea>\n"
    )


def _option(option: dict[str, Any]) -> str:
    """select_option.html."""
    value, label = _safe(option["value"]), _shown(option["label"])
    return f'<option value="{value}"{_attrs(option["attrs"])}>{label}</option>\n'


def _select(widget: dict[str, Any]) -> str | None:
    parts = [f'<select name="{_shown(widget["name"])}"{_attrs(widget["attrs"])}>']
    for group_name, group_choices, _index in widget["optgroups"]:
        if group_name:
            parts.append(f'\n  <optgroup label="{_shown(group_name)}">')
        for option in group_choices:
            if option.get("template_name") != "django/forms/widgets/select_option.html":
                return None  # an option of another kind: the templates write it
            parts.append("\n  " + _option(option))
        if group_name:
            parts.append("\n  </optgroup>")
    parts.append("\n</select>\n")
    return "".join(parts)


def _errors(context: dict[str, Any]) -> str:
    """errors/list/ul.html (default.html includes it)."""
    errors = context["errors"]
    if not errors:
        return ""
    field_id = getattr(errors, "field_id", None)
    named = f' id="{_shown(field_id)}_error"' if field_id else ""
    items = "".join(f"<li>{_shown(error)}</li>" for error in errors)
    return f'<ul class="{_shown(context["error_class"])}"{named}>{items}</ul>'


def _widget(write: Callable[[dict[str, Any]], str | None]) -> Callable[[dict[str, Any]], str | None]:
    return lambda context: write(context["widget"])


_WRITERS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    **{f"{_FORMS}widgets/{name}.html": _widget(_input) for name in _INPUTS},
    f"{_FORMS}widgets/textarea.html": _widget(_textarea),
    f"{_FORMS}widgets/select.html": _widget(_select),
    f"{_FORMS}errors/list/default.html": _errors,
    f"{_FORMS}errors/list/ul.html": _errors,
}


_INCLUDED = [f"{_FORMS}widgets/attrs.html", f"{_FORMS}widgets/select_option.html"]


class Renderer(DjangoTemplates):
    """Django's DjangoTemplates renderer, with the templates in _WRITERS written in Python."""

    @cached_property
    def writers(self) -> dict[str, Callable[[dict[str, Any]], str | None]]:
        """_WRITERS, while every template they write for (and those templates include) is Django's
        own here; none if an app overrides any of them (its override is rendered instead)."""
        for name in [*_WRITERS, *_INCLUDED]:
            template: Any = self.engine.get_template(name)
            if not Path(template.origin.name).is_relative_to(_OWN):
                return {}
        return _WRITERS

    def render(self, template_name: str, context: dict[str, Any], request: Any = None) -> str:
        write = self.writers.get(template_name)
        if write is not None:
            written = write(context)
            if written is not None:
                return written.strip()
        return super().render(template_name, context, request=request)


def verify_sources() -> list[str]:
    """The written templates whose source is not what this module writes for (a Django upgrade
    changed them): tests/lib/test_widgets.py fails on any."""
    changed = []
    for name in _INPUTS:
        if name != "input" and (_OWN / _FORMS / "widgets" / f"{name}.html").read_text() != _INCLUDE_INPUT:
            changed.append(name)
    return changed
