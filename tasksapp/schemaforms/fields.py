"""Form fields from a flat JSON object schema (PROTOCOL.md §6.1), which a server may not be trusted with.

Every field built here cleans to a JSON value, with None meaning "not answered" (left out
of the answer or the arguments), and has from_json() to pre-fill it from a JSON value.
Shapes outside the flat subset become a problem to report, never an exception.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime
from django.utils.html import escape
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

JsonObject = dict[str, Any]

MAX_FIELDS = 100
MAX_CHOICES = 200
MAX_NAME = 200
MAX_LABEL = 200
MAX_HELP = 2000
MAX_STRING = 100_000
MAX_CHOICE_VALUE = 1000
NOT_ANSWERED = gettext_lazy("— (not answered)")
NOT_REPRESENTABLE = object()

# Keywords that change which values exist rather than constrain one; only the shapes of
# §6.1 may use some of them (a titled enum's oneOf, a multi-select's items).
_STRUCTURAL = frozenset(
    {
        *("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"),
        *("properties", "patternProperties", "additionalProperties", "unevaluatedProperties"),
        *("propertyNames", "dependentSchemas", "dependentRequired"),
        *("items", "prefixItems", "contains", "unevaluatedItems", "enum", "const", "enumNames"),
    }
)
_ROOT_STRUCTURAL = _STRUCTURAL - {"properties", "additionalProperties", "unevaluatedProperties"}
_OWN_KEYWORDS = {
    "string": {"enum", "enumNames", "oneOf"},
    "number": set(),
    "integer": set(),
    "boolean": set(),
    "array": {"items"},
}


class Unsupported(Exception):
    """A property schema outside the flat subset of §6.1."""


def clip(value: object, limit: int) -> str:
    """The value when it is a string, cut to limit characters; otherwise ""."""
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _bound(schema: JsonObject, key: str) -> float | int | None:
    value = schema.get(key)
    return value if is_number(value) else None


def _length(schema: JsonObject, key: str) -> int | None:
    value = schema.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return min(value, MAX_STRING)
    return None


class JsonValueField(forms.Field):
    """A field whose clean() returns a JSON value, or None for "not answered"."""

    def from_json(self, value: object) -> object:
        """The widget value that shows this JSON value, or NOT_REPRESENTABLE."""
        return NOT_REPRESENTABLE


class TextField(JsonValueField, forms.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(empty_value=None, **kwargs)

    def from_json(self, value: object) -> object:
        return value if isinstance(value, str) and len(value) <= MAX_STRING else NOT_REPRESENTABLE


class EmailTextField(TextField, forms.EmailField):
    pass


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def validate_absolute_uri(value: str) -> None:
    """RFC 3986 absolute URI: a scheme, a colon, and only characters a URI may hold."""
    if not _URI.fullmatch(value) or _BAD_PERCENT.search(value):
        raise ValidationError(_("Enter an absolute URI, such as https://example.com/page."), code="invalid")


class IsoDateField(JsonValueField, forms.DateField):
    """Cleans to "YYYY-MM-DD"."""

    widget = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
    input_formats = ["%Y-%m-%d"]

    def clean(self, value: Any) -> str | None:
        parsed = super().clean(value)
        return parsed.isoformat() if parsed else None

    def from_json(self, value: object) -> object:
        try:
            return value if isinstance(value, str) and self.to_python(value) else NOT_REPRESENTABLE
        except ValidationError:
            return NOT_REPRESENTABLE


def _datetime(value: object) -> datetime | None:
    """An aware datetime; naive input is taken as UTC."""
    try:
        parsed = parse_datetime(value.strip()) if isinstance(value, str) else None
    except ValueError:
        return None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


class IsoDateTimeField(JsonValueField):
    """Cleans to ISO 8601 with an offset ("…Z" for UTC); the widget shows UTC wall time."""

    widget = forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"})

    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        parsed = _datetime(value)
        if parsed is None:
            raise ValidationError(_("Enter a valid date and time."), code="invalid")
        return parsed

    def clean(self, value: Any) -> str | None:
        parsed = super().clean(value)
        return parsed.isoformat().replace("+00:00", "Z") if parsed else None

    def from_json(self, value: object) -> object:
        parsed = _datetime(value)
        if parsed is None:
            return NOT_REPRESENTABLE
        return parsed.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


class NumberField(JsonValueField, forms.FloatField):
    def from_json(self, value: object) -> object:
        return value if is_number(value) else NOT_REPRESENTABLE


class WholeNumberField(JsonValueField, forms.IntegerField):
    def from_json(self, value: object) -> object:
        whole = isinstance(value, int | float) and is_number(value) and float(value).is_integer()
        return int(value) if whole and isinstance(value, int | float) else NOT_REPRESENTABLE


class _Checkbox(forms.CheckboxInput):
    def use_required_attribute(self, initial: Any) -> bool:
        return False  # unchecked is a valid answer (False), so the browser must not insist


class RequiredBooleanField(JsonValueField, forms.BooleanField):
    """A checkbox whose unchecked state answers False, so "required" never rejects it."""

    widget = _Checkbox

    def validate(self, value: Any) -> None:
        return None

    def from_json(self, value: object) -> object:
        return value if isinstance(value, bool) else NOT_REPRESENTABLE


class OptionalBooleanField(JsonValueField, forms.ChoiceField):
    """Yes / No / not answered: an untouched optional boolean is left out of the answer."""

    def __init__(self, **kwargs: Any) -> None:
        choices = [("", NOT_ANSWERED), ("true", _("Yes")), ("false", _("No"))]
        super().__init__(choices=choices, required=False, **kwargs)

    def clean(self, value: Any) -> bool | None:
        return {"true": True, "false": False}.get(super().clean(value))

    def from_json(self, value: object) -> object:
        return ("true" if value else "false") if isinstance(value, bool) else NOT_REPRESENTABLE


class SingleChoiceField(JsonValueField, forms.ChoiceField):
    def clean(self, value: Any) -> str | None:
        return super().clean(value) or None

    def from_json(self, value: object) -> object:
        return value if isinstance(value, str) and value and self.valid_value(value) else NOT_REPRESENTABLE


class MultiChoiceField(JsonValueField, forms.MultipleChoiceField):
    """Checkboxes; an untouched optional one is left out, a required one may answer []."""

    widget = forms.CheckboxSelectMultiple

    def __init__(
        self, *, options: list[tuple[str, str]], min_items: int | None, max_items: int | None, required: bool
    ) -> None:
        super().__init__(choices=options, required=required)
        self.offered = [value for value, _ in options]
        self.min_items, self.max_items = min_items, max_items

    def validate(self, value: Any) -> None:
        for item in value:
            if not self.valid_value(item):
                message = f"{clip(item, 100)!r} is not one of the choices."
                raise ValidationError(message, code="invalid_choice")
        if not value and not self.required:
            return
        if self.min_items is not None and len(value) < self.min_items:
            raise ValidationError(
                _("Choose at least %(count)d.") % {"count": self.min_items}, code="min_items"
            )
        if self.max_items is not None and len(value) > self.max_items:
            raise ValidationError(
                _("Choose at most %(count)d.") % {"count": self.max_items}, code="max_items"
            )

    def clean(self, value: Any) -> list[str] | None:
        chosen = set(super().clean(value))
        ordered = [value for value in self.offered if value in chosen]
        return ordered if ordered or self.required else None

    def from_json(self, value: object) -> object:
        if isinstance(value, list) and all(isinstance(v, str) and self.valid_value(v) for v in value):
            return value
        return NOT_REPRESENTABLE


# Building fields from property schemas.


def _options(schema: JsonObject, *, titled_key: str) -> list[tuple[str, str]]:
    """(value, label) pairs from enum (+ legacy enumNames) or [{const, title}] under titled_key."""
    if "enum" in schema:
        values, labels = schema["enum"], schema.get("enumNames")
        if not isinstance(values, list):
            raise Unsupported
        if not (isinstance(labels, list) and len(labels) == len(values)):
            labels = values
        pairs = [(v, label if isinstance(label, str) else v) for v, label in zip(values, labels, strict=True)]
    else:
        entries = schema.get(titled_key)
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise Unsupported
        pairs = [(e.get("const"), e.get("title", e.get("const"))) for e in entries]
        pairs = [(v, label if isinstance(label, str) else v) for v, label in pairs]
    return _checked_options(pairs)


def _checked_options(pairs: list[tuple[Any, Any]]) -> list[tuple[str, str]]:
    if not pairs or len(pairs) > MAX_CHOICES:
        raise Unsupported
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_CHOICE_VALUE for v, _ in pairs):
        raise Unsupported
    seen: dict[str, str] = {}
    for value, label in pairs:
        seen.setdefault(value, clip(label, MAX_LABEL) or value)
    return list(seen.items())


def _choice_field(schema: JsonObject, required: bool) -> JsonValueField:
    options = _options(schema, titled_key="oneOf")
    has_default = isinstance(schema.get("default"), str) and schema["default"] in dict(options)
    placeholder = str(NOT_ANSWERED) if not required else _("— choose —")
    blank = [] if required and has_default else [("", placeholder)]
    return SingleChoiceField(choices=blank + options, required=required)


def _string_field(schema: JsonObject, required: bool) -> JsonValueField:
    if "enum" in schema or "oneOf" in schema:
        return _choice_field(schema, required)
    fmt = schema.get("format")
    if fmt == "date":
        return IsoDateField(required=required)
    if fmt == "date-time":
        return IsoDateTimeField(required=required)
    max_length = _length(schema, "maxLength")
    lengths = {"min_length": _length(schema, "minLength"), "max_length": max_length or MAX_STRING}
    if fmt == "email":
        return EmailTextField(required=required, **(lengths | {"max_length": max_length or 320}))
    if fmt == "uri":
        uri = {"validators": [validate_absolute_uri], "widget": forms.URLInput}
        return TextField(required=required, **uri, **lengths)
    return TextField(required=required, **lengths)


def _number_field(schema: JsonObject, required: bool) -> JsonValueField:
    low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
    if schema["type"] == "integer":  # the whole numbers inside the bounds
        low, high = (
            (math.ceil(low) if low is not None else None),
            (math.floor(high) if high is not None else None),
        )
        return WholeNumberField(required=required, min_value=low, max_value=high)
    return NumberField(required=required, min_value=low, max_value=high)


def _boolean_field(schema: JsonObject, required: bool) -> JsonValueField:
    return RequiredBooleanField(required=True) if required else OptionalBooleanField()


def _multi_field(schema: JsonObject, required: bool) -> JsonValueField:
    items = schema.get("items")
    if not isinstance(items, dict) or (items.keys() & _STRUCTURAL) - {"enum", "anyOf", "oneOf"}:
        raise Unsupported
    if items.get("type", "string") != "string":
        raise Unsupported
    options = _options(items, titled_key="anyOf" if "anyOf" in items else "oneOf")
    low, high = _length(schema, "minItems"), _length(schema, "maxItems")
    return MultiChoiceField(options=options, min_items=low, max_items=high, required=required)


_BUILDERS = {
    "string": _string_field,
    "number": _number_field,
    "integer": _number_field,
    "boolean": _boolean_field,
    "array": _multi_field,
}


def schema_field(name: str, schema: object, *, required: bool) -> JsonValueField:
    """A form field for one flat property schema; raises Unsupported for anything else."""
    if not isinstance(schema, dict) or not isinstance(schema.get("type"), str):
        raise Unsupported
    kind = schema["type"]
    if kind not in _BUILDERS or (schema.keys() & _STRUCTURAL) - _OWN_KEYWORDS[kind]:
        raise Unsupported
    built = _BUILDERS[kind](schema, required)
    built.label = clip(schema.get("title"), MAX_LABEL).strip() or clip(name, MAX_LABEL)
    help_text = clip(schema.get("description"), MAX_HELP)
    if kind == "string" and schema.get("format") == "date-time":
        help_text = f"{help_text} (Time in UTC.)".strip()
    built.help_text = escape(help_text)  # Django's form templates render help_text with |safe
    initial = built.from_json(schema["default"]) if "default" in schema else NOT_REPRESENTABLE
    if initial is not NOT_REPRESENTABLE:
        built.initial = initial
    return built


@dataclass
class FlatFields:
    """The fields a flat object schema maps to, and what could not be mapped (names or reasons)."""

    fields: dict[str, JsonValueField] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _root_problem(schema: object) -> str | None:
    if not isinstance(schema, dict):
        return _("the schema itself (not a JSON object)")
    if schema.get("type", "object") != "object":
        return _("the schema itself (not of type object)")
    if not isinstance(schema.get("properties", {}), dict):
        return _("the schema itself (properties is not an object)")
    extra = sorted(str(k) for k in schema.keys() & _ROOT_STRUCTURAL)
    for key in ("additionalProperties", "unevaluatedProperties"):
        if isinstance(schema.get(key), dict) and schema[key]:
            extra.append(key)
    return _("the schema itself (%(keywords)s)") % {"keywords": ", ".join(extra)} if extra else None


def flat_fields(schema: object) -> FlatFields:
    """Fields for each property of a flat object schema (§6.1); never raises."""
    problem = _root_problem(schema)
    if problem is not None:
        return FlatFields(problems=[problem])
    assert isinstance(schema, dict)
    properties: dict[Any, Any] = schema.get("properties", {})
    if len(properties) > MAX_FIELDS:
        return FlatFields(
            problems=[_("the schema itself (more than %(count)s fields)") % {"count": MAX_FIELDS}]
        )
    listed = schema.get("required")
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    missing = sorted(required - properties.keys())[:MAX_FIELDS]
    built = FlatFields(problems=[clip(name, 100) for name in missing])
    for name, prop in properties.items():
        try:
            if not 0 < len(name) <= MAX_NAME:
                raise Unsupported
            built.fields[name] = schema_field(name, prop, required=name in required)
        except Unsupported:
            built.problems.append(clip(name, 100))
    return built


def initial_from(fields: dict[str, JsonValueField], values: JsonObject) -> JsonObject | None:
    """Widget values showing values in fields; None when some value has no field that can show it."""
    initial: JsonObject = {}
    for name, value in values.items():
        target = fields.get(name)
        shown = target.from_json(value) if target is not None else NOT_REPRESENTABLE
        if shown is NOT_REPRESENTABLE:
            return None
        initial[name] = shown
    return initial
