"""The form renderer that writes widgets in Python (tasksapp/lib/widgets.py) writes byte for byte what
Django's own templates write: every widget kind the dashboard's forms use, with hostile names,
labels, values and attributes, bound and unbound, valid and not, in two languages."""

import datetime
from typing import Any, cast

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates
from django.test import override_settings
from django.utils import translation
from django.utils.safestring import mark_safe

from tasksapp.lib.widgets import Renderer, verify_sources
from tasksapp.schemaforms.elicitation import elicitation_form

HOSTILE = "\"><script>alert(1)</script>&amp;'<b>"
CHOICES = [("a", "Apple"), (HOSTILE, HOSTILE), ("", "none"), (3, 3.5)]
GROUPED = [("Fruit", [("a", "Apple"), ("b", HOSTILE)]), ("c", "Carrot"), (HOSTILE, [("d", "Date")])]


class Everything(forms.Form):
    text = forms.CharField(label=HOSTILE, help_text=HOSTILE, max_length=5, initial=HOSTILE)
    safe = forms.CharField(
        initial=mark_safe("<b>kept</b>"), widget=forms.TextInput(attrs={"data-x": HOSTILE})
    )
    number = forms.FloatField(min_value=0, initial=1234567.5)
    whole = forms.IntegerField(required=False, widget=forms.NumberInput(attrs={"step": 1, "readonly": True}))
    email = forms.EmailField(required=False)
    url = forms.URLField(
        required=False, widget=forms.URLInput(attrs={"placeholder": HOSTILE, "hidden": False})
    )
    password = forms.CharField(widget=forms.PasswordInput(render_value=True), required=False)
    secret = forms.CharField(widget=forms.PasswordInput, required=False, initial="not shown")
    hidden = forms.CharField(widget=forms.HiddenInput, initial=HOSTILE)
    day = forms.DateField(
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"), initial=datetime.date(2026, 12, 4)
    )
    when = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}), required=False
    )
    at = forms.TimeField(required=False, initial=datetime.time(1, 2, 3))
    tick = forms.BooleanField(required=False, initial=True)
    untick = forms.BooleanField(required=True)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), initial=HOSTILE + "\nline two")
    blank = forms.CharField(widget=forms.Textarea, required=False)
    thousands = forms.CharField(widget=forms.Textarea, initial=1234567, required=False)
    pick = forms.ChoiceField(choices=CHOICES, initial=HOSTILE)
    grouped = forms.ChoiceField(choices=GROUPED, required=False)
    many = forms.MultipleChoiceField(
        choices=CHOICES, widget=forms.SelectMultiple, required=False, initial=["a", 3]
    )
    boxes = forms.MultipleChoiceField(choices=CHOICES, widget=forms.CheckboxSelectMultiple, required=False)
    radio = forms.ChoiceField(choices=CHOICES, widget=forms.RadioSelect, required=False)
    color = forms.CharField(widget=forms.TextInput(attrs={"type": "color"}), required=False)
    search = forms.CharField(widget=forms.SearchInput, required=False)
    tel = forms.CharField(widget=forms.TelInput, required=False)
    upload = forms.FileField(required=False, widget=forms.FileInput)

    def clean(self) -> dict[str, Any]:
        self.add_error(None, HOSTILE)
        self.add_error(None, mark_safe("<i>a safe error</i>"))
        return self.cleaned_data


BOUND = {
    "text": HOSTILE, "number": "-1", "whole": "x" + HOSTILE, "email": HOSTILE, "url": HOSTILE,
    "password": HOSTILE, "secret": HOSTILE, "hidden": "", "day": "2026-13-40", "tick": "on",
    "note": HOSTILE, "pick": "nope", "grouped": "b", "many": ["a", HOSTILE], "boxes": [HOSTILE],
    "radio": "", "when": "2026-12-04T10:00:00",
}  # fmt: skip


def written(form: forms.Form) -> list[str]:
    """Each field's widget and errors, the form's own errors, and the whole form (its template is not
    one Renderer writes, but it includes fields that it does)."""
    parts = [str(form.non_field_errors()), form.render()]
    for field in form:
        parts += [str(field), str(field.errors), field.as_hidden() if field.name == "text" else ""]
    return parts


def both(make: Any) -> tuple[list[str], list[str]]:
    outputs = []
    for renderer in (DjangoTemplates(), Renderer()):
        form = make(renderer)
        if form.is_bound:
            form.is_valid()
        outputs.append(written(form))
    return outputs[0], outputs[1]


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("bound", [False, True], ids=["unbound", "bound"])
def test_every_widget_is_written_as_djangos_templates_write_it(bound: bool, language: str) -> None:
    with translation.override(language), override_settings(USE_THOUSAND_SEPARATOR=True):
        django, ours = both(lambda renderer: Everything(BOUND if bound else None, renderer=renderer))
    assert len(django) == len(ours)
    for theirs, mine in zip(django, ours, strict=True):
        assert mine == theirs
    assert any("&lt;script&gt;" in part for part in ours)  # hostile values were there, escaped
    # (the whole form, ours[1], shows help texts unescaped: Django's field.html marks them safe)
    assert not any("<script>" in part for part in ours[:1] + ours[2:])


def test_an_elicitation_form_is_written_as_djangos_templates_write_it() -> None:
    schema = {
        "type": "object",
        "required": ["name", "size"],
        "properties": {
            "name": {"type": "string", "title": HOSTILE, "description": HOSTILE, "default": HOSTILE},
            "size": {"type": "integer", "minimum": 1},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"},
            "maybe": {"type": "boolean", "default": False},
            "mode": {"type": "string", "enum": ["fast", HOSTILE], "enumNames": ["Fast", HOSTILE]},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            "day": {"type": "string", "format": "date"},
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "home": {"type": "string", "format": "uri"},
        },
    }
    for data in (None, {"p-name": HOSTILE, "p-size": "0", "p-mode": "x", "p-mail": HOSTILE}):
        django, ours = both(
            lambda renderer, data=data: _with(elicitation_form(schema, data=data, prefix="p"), renderer)
        )
        assert ours == django


def _with(form: forms.Form, renderer: Any) -> forms.Form:
    form.renderer = renderer
    return form


def test_a_template_an_app_overrides_is_rendered_not_written(tmp_path: Any) -> None:
    override = tmp_path / "templates" / "django" / "forms" / "widgets"
    override.mkdir(parents=True)
    (override / "input.html").write_text("<input overridden>")
    renderer = Renderer()
    # First in the renderer's directories, as an app's templates would be.
    cast(Any, renderer.engine).engine.dirs.insert(0, str(tmp_path / "templates"))
    field = forms.CharField().widget
    assert field.render("x", "y", renderer=renderer) == "<input overridden>"
    assert forms.Textarea().render("x", "y", renderer=renderer).startswith("<textarea")


def test_the_templates_it_writes_for_are_the_ones_it_was_written_from() -> None:
    assert verify_sources() == []
