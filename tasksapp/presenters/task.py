"""Preparing untrusted server data for templates: results, errors, input requests.

Templates autoescape every string; this module decides what may become a link, an image or audio.
"""

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

from tasksapp import lifecycle
from tasksapp.lib.prepared import Prepared
from tasksapp.models import InputRequest, RemoteTask, TaskEvent
from tasksapp.permissions import roles_of
from tasksapp.schemaforms import elicitation

MAX_TEXT = 100_000
MAX_INLINE_MEDIA = 2 * 1024 * 1024
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
AUDIO_TYPES = {"audio/wav", "audio/x-wav", "audio/mpeg", "audio/ogg", "audio/webm"}


TIMELINE_PAGE = 50
SHOW_LIMIT = 999_999  # the most timeline rows a page's ?show= may ask for (six digits)


def task_context(task: RemoteTask, user: Any, *, show: int = TIMELINE_PAGE) -> dict[str, Any]:
    shown = timeline(task, show)
    # Where its time went: from the timeline's events when the page shows them all (no query).
    every_event = None if shown["events_hidden"] else shown["events"]
    return {
        "task": task,
        **shown,
        "inputs": [input_view(request) for request in open_requests(task)],
        "blocks": content_blocks(task.result),
        "structured": pretty(task.result.get("structuredContent")) if isinstance(task.result, dict) else None,
        "error_data": pretty(task.error.get("data")) if isinstance(task.error, dict) else None,
        "raw_json": pretty({**task.raw, "result": task.result, "error": task.error}),
        "arguments_json": pretty(task.arguments),
        "life": lifecycle.of_task(task, every_event),  # the card's bar
        **roles_of(user),
    }


def detail_task(pk: int) -> RemoteTask | None:
    """The task a task's page shows (RemoteTask.objects.for_detail()), None if there is none. A busy
    task's live page reads it per change: compiled once (the compilation was most of the read)."""
    return _detail_task.first(pk)


_detail_task = Prepared(lambda pk: RemoteTask.objects.for_detail().filter(pk=pk), 1)


def timeline(task: RemoteTask, show: int) -> dict[str, Any]:
    """The latest `show` events, oldest first, and how many older ones the page leaves out."""
    show = max(TIMELINE_PAGE, show)
    if show == TIMELINE_PAGE:  # most pages: a query compiled once (a live page reads it per change)
        latest = _latest_events.all(task.pk)
        for event in latest:
            event.task = task  # as task.events would have it
    else:
        latest = list(task.events.order_by("-observed_at", "-id")[:show])
    hidden = _events.count(task.pk) - len(latest) if len(latest) == show else 0
    return {
        "events": latest[::-1],
        "events_hidden": hidden,
        "events_more": show + min(hidden, TIMELINE_PAGE),
        "events_next": min(hidden, TIMELINE_PAGE),
    }


_latest_events = Prepared(
    lambda task_id: TaskEvent.objects.filter(task_id=task_id).order_by("-observed_at", "-id")[:TIMELINE_PAGE],
    1,
)
_events = Prepared(lambda task_id: TaskEvent.objects.filter(task_id=task_id), 1)
_open_requests = Prepared(lambda task_id: InputRequest.objects.filter(task_id=task_id, state="open"), 1)


def open_requests(task: RemoteTask) -> list[InputRequest]:
    """The questions of the task that wait for an answer (task.input_requests.filter(state="open"))."""
    found = _open_requests.all(task.pk)
    for request in found:
        request.task = task
    return found


def pretty(value: Any) -> str | None:
    if value is None:
        return None
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "\n… (truncated)"


def safe_link(uri: Any) -> str | None:
    """Only http(s) URLs become links; anything else (javascript:, data:, file:) stays text."""
    if not isinstance(uri, str):
        return None
    parts = urlsplit(uri.strip())
    return uri.strip() if parts.scheme in ("http", "https") and parts.netloc else None


def content_blocks(result: Any) -> list[dict[str, Any]]:
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return []
    return [_block(block) for block in content[:200] if isinstance(block, dict)]


def _block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"kind": "text", "text": str(block.get("text", ""))[:MAX_TEXT]}
    if kind in ("image", "audio"):
        return _media(block, kind)
    if kind == "resource_link":
        return {
            "kind": "link",
            "name": str(block.get("name") or block.get("title") or ""),
            "uri": str(block.get("uri", "")),
            "href": safe_link(block.get("uri")),
            "mime": str(block.get("mimeType", "")),
        }
    if kind == "resource":
        raw = block.get("resource")
        resource: dict[str, Any] = raw if isinstance(raw, dict) else {}
        text = resource.get("text")
        return {
            "kind": "resource",
            "uri": str(resource.get("uri", "")),
            "mime": str(resource.get("mimeType", "")),
            "text": str(text)[:MAX_TEXT] if text is not None else None,
            "size": len(str(resource.get("blob", ""))) if "blob" in resource else None,
        }
    return {"kind": "other", "json": pretty(block)}


def _media(block: dict[str, Any], kind: str) -> dict[str, Any]:
    mime, data = str(block.get("mimeType", "")), block.get("data")
    allowed = IMAGE_TYPES if kind == "image" else AUDIO_TYPES
    if mime in allowed and isinstance(data, str) and len(data) <= MAX_INLINE_MEDIA:
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            pass
        else:
            return {"kind": kind, "src": f"data:{mime};base64,{data}", "mime": mime}
    return {"kind": "other", "json": f"[{kind} {mime or 'unknown type'}: not shown]"}


@dataclass
class InputView:
    """What a question's card shows. Its form is built when first read: a card rendered before
    (`rendered_once` in _input_request.html, for an unbound form) reads none of it."""

    request: InputRequest
    kind: str  # form | url | sampling | roots | unsupported
    url: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None
    message: str = ""
    build: Callable[[], Any] | None = None  # makes the form
    schema: dict[str, Any] | None = None  # an elicitation form's requestedSchema
    bound: bool = False  # the form was given an answer (it may show errors)

    @property
    def prefix(self) -> str:
        return f"ir{self.request.pk}"

    @cached_property
    def form(self) -> Any:
        return self.build() if self.build is not None else None

    @cached_property
    def secrets(self) -> list[str] | None:
        """Fields of an elicitation form that seem to ask for a secret (§6.1 forbids it)."""
        return elicitation.looks_like_secret(self.schema) if self.schema is not None else None

    @cached_property
    def fingerprint(self) -> str:
        """The question as asked (its method and parameters): a rendered card is reused only for it."""
        asked = json.dumps([self.request.method, self.request.params], sort_keys=True, default=str)
        return hashlib.blake2b(asked.encode(), digest_size=16).hexdigest()


def input_view(request: InputRequest, data: Any = None) -> InputView:
    params = request.params if isinstance(request.params, dict) else {}
    message = str(params.get("message", ""))[:5000]
    prefix = f"ir{request.pk}"
    bound = data is not None
    if request.method == "elicitation/create":
        if params.get("mode") == "url":
            return InputView(request, "url", url=elicitation.url_request_view(params), message=message)
        schema = params.get("requestedSchema")
        schema = schema if isinstance(schema, dict) else {}
        return InputView(
            request,
            "form",
            message=message,
            build=lambda: elicitation.elicitation_form(schema, data=data, prefix=prefix),
            schema=schema,
            bound=bound,
        )
    if request.method == "sampling/createMessage":
        return InputView(
            request,
            "sampling",
            sampling=elicitation.sampling_summary(params),
            build=lambda: elicitation.sampling_form(params, data=data, prefix=prefix),
            bound=bound,
        )
    if request.method == "roots/list":
        return InputView(request, "roots")
    return InputView(
        request, "unsupported", message=_("This server asked for %(method)r.") % {"method": request.method}
    )
