"""The inbox of open input requests, and answering them (in a task or before one exists).

A compact list, the most urgent first: one row per question, expanded with one click (<details>),
filtered by server, tool and kind; questions asked before a task exists (MRTR) are listed on the
first page with the rest. Answering with htmx replaces only that task's rows; without JavaScript
the answer redirects back to the same place in the list (#anchor). docs/operator.md.
"""

import time
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _

from tasksapp import services
from tasksapp.models import InputRequest, PendingCall
from tasksapp.permissions import ANSWER, START, VIEW, require
from tasksapp.presenters.inbox import (
    _LARGE,
    KINDS,
    _open,
    inbox_filters,
    inbox_items,
    inbox_servers,
    open_calls,
    tasks_by_urgency,
)
from tasksapp.presenters.task import InputView, content_blocks, input_view, pretty
from tasksapp.queryparams import bad_ids
from tasksapp.schemaforms import elicitation
from tasksapp.views.common import page, safe_next

# Tasks per inbox page, each with its open requests as answerable forms: rendering the forms is
# most of the page's cost (about 2.5 ms for a five-field form), so ten keep it far under 100 ms.
PAGE_TASKS = 10


@require(VIEW)
def inbox(request: HttpRequest) -> HttpResponse:
    filters = inbox_filters(request.GET)
    ranked = Paginator(tasks_by_urgency(filters), PAGE_TASKS).get_page(request.GET.get("page"))
    items = inbox_items(list(ranked.object_list), filters)
    context = {
        "items": items,
        "calls": [_call_item(call) for call in open_calls(filters)] if ranked.number == 1 else [],
        "page_obj": ranked,
        "filters": filters,
        "filtered": any(filters.values()),
        "ignored": [(key, request.GET[key]) for key in bad_ids(request.GET, ["server"])],
        "kinds": KINDS,
        "servers": inbox_servers(),
        "query": urlencode({key: value for key, value in filters.items() if value}),
        "inbox_next": request.get_full_path(),
        "now": time.time(),
        "picked_all": request.GET.get("picked") == "all",  # "select all" without JavaScript
    }
    # The socket gets the filters too, so a question pushed live is added only if it matches them.
    live = {"page": "inbox", **{key: value for key, value in filters.items() if value}}
    # And the tasks it shows: a question of another task, seen around the page's time, is added.
    live["items"] = ",".join(str(item["task"].pk) for item in items)
    return page(request, "tasksapp/inbox.html", context, nav="inbox", live=live)


def _call_item(call: PendingCall) -> dict[str, Any]:
    return {"call": call, "views": _pending_views(call)}


@require(ANSWER)
def answer(request: HttpRequest, pk: int) -> HttpResponse:
    rows = InputRequest.objects.select_related("task__server", "task__agent").defer(*_LARGE)
    row = get_object_or_404(rows, pk=pk)
    back = safe_next(request, f"/tasks/{row.task_id}/")
    if request.method != "POST":
        return redirect(back)
    in_place = bool(getattr(request, "htmx", False)) and request.POST.get("in_place") == "1"
    response, view = build_response(row, request.POST)
    if response is None:
        if in_place:
            return _task_rows(
                request,
                row.task_id,
                back,
                notice=_("Please correct the answer; nothing was sent."),
                failed=view,
            )
        messages.error(request, _("Please correct the answer below; nothing was sent."))
        context = {"task": row.task, "view": view, "next": back}
        return page(request, "tasksapp/answer_again.html", context, nav="inbox", status=422)
    ranked = tasks_by_urgency() if back.startswith("/inbox/") and not in_place else []
    ok, notice = _send(row, response, request.user)
    if in_place:
        return _task_rows(request, row.task_id, back, notice=notice, ok=ok)
    (messages.success if ok else messages.error)(request, notice)
    anchor = _anchor_after(row.task_id, ranked) if ranked and "#" not in back else ""
    return redirect(back + (f"#{anchor}" if anchor else ""))


def _send(row: InputRequest, response: dict[str, Any], user: Any) -> tuple[bool, str]:
    try:
        services.task_answer(task=row.task, key=row.key, response=response, user=user)
    except services.ServiceError as exc:
        return False, str(exc)
    names = {"server": row.task.server.name, "task": row.task_id}
    return True, _("Answer sent to %(server)s for task #%(task)s.") % names


def _anchor_after(task_id: int, ranked: list[int]) -> str:
    """Where the reloaded list should scroll to: this task's rows if it still asks something, else
    the task that followed it (which moved up into its place), else the one before."""
    if task_id not in ranked:
        return ""
    if _open().filter(task_id=task_id).exists():
        return f"inbox-task-{task_id}"
    index = ranked.index(task_id)
    neighbours = ranked[index + 1 : index + 2] or ranked[max(index - 1, 0) : index]
    return f"inbox-task-{neighbours[0]}" if neighbours else ""


def _task_rows(
    request: HttpRequest, task_id: int, back: str, *, notice: str, ok: bool = False, failed: Any = None
) -> HttpResponse:
    """htmx: a one-line outcome for #inbox-status (the forms' target: the live socket never replaces
    it), and this task's rows, re-read, out of band (with a form's errors)."""
    found = inbox_items([task_id])
    item: dict[str, Any] = found[0] if found else {"task": {"pk": task_id}, "inputs": []}
    if failed is not None:
        item["inputs"] = [failed if view.request.pk == failed.request.pk else view for view in item["inputs"]]
    context = {
        "item": item,
        "inbox_next": back,
        "notice": notice,
        "notice_ok": ok,
        "fresh_prefix": failed.prefix if failed is not None else "",
        "can_answer": True,
        "open_first": failed is not None,
        "answered_task": task_id,
    }
    return render(request, "tasksapp/inbox.html#inbox-answered", context)


def build_response(row: InputRequest, post: Any) -> tuple[dict[str, Any] | None, InputView]:
    """The response object to send for a submitted form, or None with the form's errors."""
    action = post.get("action", "accept")
    view = input_view(row, data=post if action == "accept" else None)
    if action in ("decline", "cancel") and view.kind in ("form", "url"):
        return {"action": action}, view
    if view.kind == "url":
        return {"action": "accept"}, view
    if view.kind == "roots":
        return elicitation.roots_result(row.task.server.roots), view
    if view.kind in ("form", "sampling") and view.form.is_valid():
        if view.kind == "sampling":
            return view.form.result(), view
        if not getattr(view.form, "unsupported", False):
            return {"action": "accept", "content": view.form.content()}, view
    return None, view


@require(VIEW)
def pending_detail(request: HttpRequest, pk: int) -> HttpResponse:
    services.pending_calls_expire()
    pending = get_object_or_404(PendingCall.objects.select_related("server"), pk=pk)
    if pending.task_id:
        return redirect("tasks:detail", pk=pending.task_id)
    context: dict[str, Any] = {"pending": pending, "views": _pending_views(pending)}
    if pending.state == "done":  # answered with a result, not a task: show it as the Run page does
        result = pending.result if isinstance(pending.result, dict) else {}
        structured = pretty(result.get("structuredContent"))
        context.update(result=result, blocks=content_blocks(result), structured=structured, views=[])
    return page(request, "tasksapp/pending.html", context, nav="tasks")


@require(START)
def pending_answer(request: HttpRequest, pk: int) -> HttpResponse:
    services.pending_calls_expire()
    pending = get_object_or_404(PendingCall.objects.select_related("server"), pk=pk)
    if request.method != "POST" or pending.state in ("expired", "dismissed"):
        return redirect("tasks:pending", pk=pk)  # which says why nothing can be sent any more
    views = _pending_views(pending, request.POST)
    responses = {}
    for key, view in views:
        action = request.POST.get(f"{view.prefix}-action", "accept")
        if action in ("decline", "cancel") and view.kind in ("form", "url"):
            responses[key] = {"action": action}
        elif view.kind == "url":
            responses[key] = {"action": "accept"}
        elif view.kind == "roots":
            responses[key] = elicitation.roots_result(pending.server.roots)
        elif view.form is not None and view.form.is_valid():
            responses[key] = (
                view.form.result()
                if view.kind == "sampling"
                else {"action": "accept", "content": view.form.content()}
            )
        else:
            context = {"pending": pending, "views": views}
            return page(request, "tasksapp/pending.html", context, nav="tasks", status=422)
    try:
        started = services.pending_call_answer(pending=pending, responses=responses, user=request.user)
    except services.ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("tasks:pending", pk=pk)
    if started.task is not None:
        return redirect("tasks:detail", pk=started.task.pk)
    if started.pending is not None and started.pending.state == "open":
        messages.info(request, _("The server needs more input before it can start."))
        return redirect("tasks:pending", pk=started.pending.pk)
    return redirect("tasks:pending", pk=pk)  # a result: shown there, and a reload sends nothing again


@require(START)
def pending_dismiss(request: HttpRequest, pk: int) -> HttpResponse:
    """Close a call's questions unanswered (POST); back to where the button was."""
    pending = get_object_or_404(PendingCall.objects.select_related("server"), pk=pk)
    if request.method == "POST":
        try:
            services.pending_call_dismiss(pending=pending, user=request.user)
        except services.ServiceError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("Dismissed: %(tool)s will not start.") % {"tool": pending.tool_name})
    return redirect(safe_next(request, reverse("tasks:pending", args=[pk])))


def _pending_views(pending: PendingCall, data: Any = None) -> list[tuple[str, InputView]]:
    """MRTR requests are not rows; present them like a task's, keyed by position."""
    views = []
    for index, (key, raw) in enumerate(sorted(pending.input_requests.items())):
        stand_in = InputRequest(
            pk=index + 1, method=str(raw.get("method", "")), params=raw.get("params") or {}
        )
        views.append((key, input_view(stand_in, data=data)))
    return views
