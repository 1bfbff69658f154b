"""Answers to a server's input requests (PROTOCOL.md §6): forms, URL consent, sampling, roots.

Everything here reads text a server chose (§9): it is bounded and returned as plain
strings for templates to autoescape, links are checked but never fetched, and a form the
dashboard cannot render safely is flagged rather than half-answered.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import idna
from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.schemaforms.check import SchemaUncheckable, issue_text, property_of, schema_issues
from tasksapp.schemaforms.fields import (
    MAX_FIELDS,
    MAX_LABEL,
    MAX_STRING,
    FlatFields,
    JsonObject,
    clip,
    flat_fields,
    is_number,
    validate_absolute_uri,
)

MAX_MESSAGE = 4000
MAX_URL = 4096
MAX_MESSAGES = 50
MAX_BLOCKS = 20
MAX_BLOCK_TEXT = 8000
MAX_LIST = 20
MAX_ROOTS = 100
OPERATOR_MODEL = "human-operator"
UNSUPPORTED = gettext_lazy("This server asked for a field the dashboard cannot render safely: {}")


class SchemaForm(forms.Form):
    """A form over the fields of a flat object schema, checked against the whole schema.

    `problems` lists what could not be rendered; such a form is `unsupported` and never
    valid. `warnings` says when the schema itself could not be used for the final check.
    """

    def __init__(
        self,
        schema: object,
        *,
        built: FlatFields | None = None,
        initial: JsonObject | None = None,
        data: Any = None,
        prefix: str | None = None,
    ) -> None:
        super().__init__(data=data, prefix=prefix, initial=initial)
        built = built if built is not None else flat_fields(schema)
        self.schema = schema
        self.fields = dict(built.fields)
        self.problems = list(built.problems)
        self.warnings: list[str] = []

    @property
    def unsupported(self) -> bool:
        return bool(self.problems)

    def full_clean(self) -> None:
        super().full_clean()
        if self.problems:  # shown on an unbound form too, so the page can explain itself
            if not hasattr(self, "cleaned_data"):
                self.cleaned_data = {}
            for problem in self.problems:
                self.add_error(None, UNSUPPORTED.format(problem))

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if not self.problems:
            self._check_against_schema()
        return cleaned

    def _check_against_schema(self) -> None:
        try:
            issues = schema_issues(self.schema, self._answered())
        except SchemaUncheckable as exc:
            self.warnings.append(str(exc))
            return
        for issue in issues:
            name = property_of(issue)
            target = name if name in self.fields else None
            if target is None or target not in self.errors:
                self.add_error(target, issue_text(issue))

    def _answered(self) -> JsonObject:
        cleaned = self.cleaned_data
        return {name: cleaned[name] for name in self.fields if cleaned.get(name) is not None}

    def content(self) -> JsonObject:
        """The answered fields as JSON values, keyed by property name (untouched optional ones left out)."""
        if not self.is_valid():
            raise ValueError("content() needs a bound form that is valid")
        return self._answered()


class ElicitationForm(SchemaForm):
    """The form for an `elicitation/create` form-mode request; `secret_fields` warns of secrets."""

    def __init__(self, requested_schema: object, *, data: Any = None, prefix: str | None = None) -> None:
        super().__init__(requested_schema, data=data, prefix=prefix)
        self.secret_fields = looks_like_secret(requested_schema)


def elicitation_form(
    requested_schema: object, *, data: Any = None, prefix: str | None = None
) -> ElicitationForm:
    """The answer form for a requestedSchema (§6.1); `form.content()` after is_valid() is the content."""
    return ElicitationForm(requested_schema, data=data, prefix=prefix)


_SECRET = re.compile(
    r"\b(passwords?|passwd|pwd|pass ?phrase|pass ?code|pins?|secrets?|tokens?|api ?keys?|access ?keys?"
    r"|private ?keys?|secret ?keys?|credentials?|otp|one ?time (code|password)|2fa|mfa|totp"
    r"|credit ?cards?|card ?numbers?|cvv2?|cvc|security ?code|iban|bank ?account|account ?number"
    r"|routing ?number|sort ?code|ssn|social ?security)\b",
    re.IGNORECASE,
)


def _words(text: str) -> str:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text).replace("_", " ").replace("-", " ")


def looks_like_secret(requested_schema: object) -> list[str]:
    """Names of properties whose name, title, description or format suggest a secret (§6.1 forbids them)."""
    properties = requested_schema.get("properties") if isinstance(requested_schema, dict) else None
    if not isinstance(properties, dict):
        return []
    found = []
    for name, prop in islice(properties.items(), MAX_FIELDS):
        details = prop if isinstance(prop, dict) else {}
        texts = [clip(name, 200), clip(details.get("title"), 200), clip(details.get("description"), 2000)]
        if details.get("format") == "password" or any(_SECRET.search(_words(t)) for t in texts):
            found.append(clip(name, 100))
    return found


# URL mode (§6.2): show the host, ask for consent, never fetch.


def _has_invisible(text: str) -> bool:
    """Whitespace, control, format (bidi) or unassigned characters, which can disguise a link."""
    return any(unicodedata.category(ch)[0] in "CZ" for ch in text)


def _host_forms(hostname: str) -> tuple[str, str] | None:
    """(ASCII form, Unicode display form) of a host name; None for an invalid international name."""
    try:
        ascii_host = idna.encode(hostname, uts46=True).decode("ascii")
        return ascii_host, idna.decode(ascii_host)
    except (idna.IDNAError, UnicodeError):
        return None if not hostname.isascii() else (hostname, hostname)


def _url_refusal(url: object) -> str:
    """Why the link must not be offered, or "" when it may be."""
    if not isinstance(url, str) or not url:
        return _("The request carries no link.")
    if len(url) > MAX_URL:
        return _("The link is too long to show safely.")
    if _has_invisible(url):
        return _("The link contains spaces or invisible characters that could disguise it.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        return _("The link is malformed.")
    if parts.scheme.lower() not in ("http", "https"):
        if not parts.scheme:
            return _("Only http and https links can be opened, not a relative link.")
        return _("Only http and https links can be opened, not %(scheme)s link.") % {
            "scheme": clip(parts.scheme, 40)
        }
    if not parts.hostname:
        return _("The link has no host.")
    if parts.username is not None or parts.password is not None:
        return _("The link carries a user name or password, which can disguise its real host.")
    return "" if _host_forms(parts.hostname) else _("The link's host is not a valid domain name.")


def url_request_view(params: object) -> JsonObject:
    """What to show for a URL-mode request; `ok` is False, with a `reason`, for a link not to offer."""
    details = params if isinstance(params, dict) else {}
    view: JsonObject = {"ok": False, "url": "", "scheme": "", "host": "", "host_display": ""}
    view |= {"insecure": False, "message": clip(details.get("message"), MAX_MESSAGE), "reason": ""}
    url = details.get("url")
    view["reason"] = _url_refusal(url)
    if view["reason"] or not isinstance(url, str):
        return view
    parts = urlsplit(url)
    host, display = _host_forms(parts.hostname or "") or ("", "")
    scheme = parts.scheme.lower()
    shown = {"ok": True, "url": url, "scheme": scheme, "host": host, "host_display": display}
    return view | shown | {"insecure": scheme == "http"}


# Sampling (§6.3): a person writes the reply.

STOP_REASONS = [
    ("endTurn", gettext_lazy("End of turn")),
    ("stopSequence", gettext_lazy("Stop sequence")),
    ("maxTokens", gettext_lazy("Max tokens")),
]


class SamplingForm(forms.Form):
    text = forms.CharField(label=gettext_lazy("Reply"), widget=forms.Textarea, max_length=MAX_STRING)
    model = forms.CharField(
        label=gettext_lazy("Model name"), initial=OPERATOR_MODEL, max_length=200, required=False
    )
    stop_reason = forms.ChoiceField(
        label=gettext_lazy("Stop reason"), choices=STOP_REASONS, initial="endTurn"
    )

    def result(self) -> JsonObject:
        """The CreateMessageResult for the reply."""
        if not self.is_valid():
            raise ValueError("result() needs a bound form that is valid")
        data = self.cleaned_data
        return {
            "role": "assistant",
            "content": {"type": "text", "text": data["text"]},
            "model": data["model"] or OPERATOR_MODEL,
            "stopReason": data["stop_reason"],
        }


def sampling_form(params: object, data: Any = None, prefix: str | None = None) -> SamplingForm:
    """The reply form; the request itself is shown from sampling_summary(params)."""
    return SamplingForm(data=data, prefix=prefix)


def _block_text(block: object) -> str:
    if not isinstance(block, dict):
        return "[unreadable content]"
    kind = clip(block.get("type"), 40) or "unknown"
    if kind == "text":
        return clip(block.get("text"), MAX_BLOCK_TEXT)
    detail_key = {"image": "mimeType", "audio": "mimeType", "tool_use": "name", "tool_result": "toolUseId"}
    detail = clip(block.get(detail_key.get(kind, "")), 100)
    return f"[{kind} {detail}]" if detail else f"[{kind}]"


def _message_view(message: object) -> dict[str, str]:
    details = message if isinstance(message, dict) else {}
    content = details.get("content")
    blocks = content if isinstance(content, list) else [content]
    text = "\n\n".join(_block_text(block) for block in blocks[:MAX_BLOCKS])
    return {"role": clip(details.get("role"), 20) or "unknown", "text": clip(text, MAX_BLOCK_TEXT)}


def _names(items: object, key: str | None = None) -> list[str]:
    entries = items if isinstance(items, list) else []
    picked = [entry.get(key) if key and isinstance(entry, dict) else entry for entry in entries[:MAX_LIST]]
    return [clip(name, 100) for name in picked if isinstance(name, str)]


def sampling_summary(params: object) -> JsonObject:
    """A sampling request as bounded plain strings and lists of them, for the template to show."""
    details = params if isinstance(params, dict) else {}
    listed = details.get("messages")
    messages: list[Any] = listed if isinstance(listed, list) else []
    shown = messages[-MAX_MESSAGES:]
    preferences = details.get("modelPreferences")
    max_tokens, temperature = details.get("maxTokens"), details.get("temperature")
    return {
        "messages": [_message_view(message) for message in shown],
        "omitted_messages": len(messages) - len(shown),
        "system_prompt": clip(details.get("systemPrompt"), MAX_BLOCK_TEXT),
        "max_tokens": str(max_tokens) if is_number(max_tokens) else "",
        "temperature": str(temperature) if is_number(temperature) else "",
        "model_hints": _names(preferences.get("hints") if isinstance(preferences, dict) else [], "name"),
        "stop_sequences": _names(details.get("stopSequences")),
        "include_context": clip(details.get("includeContext"), 40),
        "tools": _names(details.get("tools"), "name"),
    }


# Roots (§6.4).


def _is_file_uri(uri: object) -> bool:
    if not isinstance(uri, str) or len(uri) > MAX_URL or not uri.startswith("file://"):
        return False
    try:
        validate_absolute_uri(uri)
    except ValidationError:
        return False
    parts = urlsplit(uri)
    return parts.path.startswith("/") and not parts.query and not parts.fragment


def roots_result(roots: object) -> JsonObject:
    """The ListRootsResult for the given roots, keeping only valid `file://` URIs (once each)."""
    kept: dict[str, JsonObject] = {}
    for root in roots[:MAX_ROOTS] if isinstance(roots, list) else []:
        uri = root.get("uri") if isinstance(root, dict) else None
        if not isinstance(uri, str) or not _is_file_uri(uri) or uri in kept:
            continue
        name = clip(root.get("name"), MAX_LABEL).strip()
        kept[uri] = {"uri": uri, "name": name} if name else {"uri": uri}
    return {"roots": list(kept.values())}
