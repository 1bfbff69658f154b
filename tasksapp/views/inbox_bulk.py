"""One answer for several open questions that ask the same thing.

The inbox's checkboxes submit their ids here (GET, no JavaScript needed). The page checks that
every selected question is an open form elicitation with the same requestedSchema, shows the form
once, and on POST sends the answer to each through services.task_answer: its open -> sending claim
is a conditional UPDATE, so a question is sent at most once however often the form is submitted
and however many people submit it at the same time. docs/operator.md.
"""

import hashlib
import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from tasksapp import services
from tasksapp.models import InputRequest
from tasksapp.permissions import ANSWER, require
from tasksapp.presenters.inbox import _LARGE, FORM_MODE, _open
from tasksapp.queryparams import parse_id
from tasksapp.schemaforms import elicitation
from tasksapp.views.common import page, safe_next

BULK_LIMIT = 100


def schema_key(row: InputRequest) -> str:
    """Equal for two questions whose forms are the same (the canonical JSON of requestedSchema)."""
    params = row.params if isinstance(row.params, dict) else {}
    schema = params.get("requestedSchema")
    text = json.dumps(schema if isinstance(schema, dict) else {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _selected(ids: list[str]) -> list[InputRequest]:
    numbers = sorted({number for value in ids if (number := parse_id(value)) is not None})[:BULK_LIMIT]
    rows = _open().filter(FORM_MODE, pk__in=numbers)
    return list(rows.select_related("task__server").defer(*_LARGE))


def _groups(rows: list[InputRequest]) -> list[list[InputRequest]]:
    by_schema: dict[str, list[InputRequest]] = {}
    for row in rows:
        by_schema.setdefault(schema_key(row), []).append(row)
    return sorted(by_schema.values(), key=len, reverse=True)


@require(ANSWER)
def inbox_bulk(request: HttpRequest) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    rows = _selected(source.getlist("ids"))
    back = safe_next(request, "/inbox/")
    if not rows:
        messages.error(request, _("Select open form questions in the inbox first; nothing was sent."))
        return redirect(back)
    groups = _groups(rows)
    schema = (rows[0].params or {}).get("requestedSchema") or {}
    form = elicitation.elicitation_form(
        schema, data=source if request.method == "POST" else None, prefix="bulk"
    )
    context: dict[str, Any] = {"rows": rows, "groups": groups, "form": form, "next": back}
    if len(groups) > 1:
        return page(request, "tasksapp/inbox_bulk.html", context, nav="inbox", status=409)
    if request.method != "POST":
        return page(request, "tasksapp/inbox_bulk.html", context, nav="inbox")
    action = request.POST.get("action", "accept")
    if action in ("decline", "cancel"):
        response: dict[str, Any] = {"action": action}
    elif form.is_valid() and not getattr(form, "unsupported", False):
        response = {"action": "accept", "content": form.content()}
    else:
        return page(request, "tasksapp/inbox_bulk.html", context, nav="inbox", status=422)
    sent, refused = _send_each(rows, response, request.user)
    _report(request, sent, refused)
    return redirect(back)


def _send_each(rows: list[InputRequest], response: dict[str, Any], user: Any) -> tuple[int, list[str]]:
    sent, refused = 0, []
    for row in rows:
        try:
            services.task_answer(task=row.task, key=row.key, response=response, user=user)
            sent += 1
        except services.ServiceError as exc:
            refused.append(f"#{row.task_id}: {exc}")
    return sent, refused


def _report(request: HttpRequest, sent: int, refused: list[str]) -> None:
    if sent:
        text = ngettext(
            "The answer was sent to %(n)d question.", "The answer was sent to %(n)d questions.", sent
        )
        messages.success(request, text % {"n": sent})
    if refused:
        text = ngettext("%(n)d was not sent: %(why)s", "%(n)d were not sent: %(why)s", len(refused))
        messages.error(request, text % {"n": len(refused), "why": "; ".join(refused[:10])})
