"""The inbox of open input requests, and answering them (in a task or before one exists)."""

import time
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect

from tasksapp import elicitation, services
from tasksapp.models import LARGE_SERVER_COLUMNS, LARGE_TASK_COLUMNS, InputRequest, PendingCall
from tasksapp.permissions import ANSWER, START, VIEW, require
from tasksapp.views.common import page, safe_next
from tasksapp.views.present import InputView, content_blocks, input_view, pretty

INBOX_LIMIT = 500
# Tasks per inbox page, each with its open requests as answerable forms: rendering the forms is
# most of the page's cost (about 2.5 ms for a five-field form), so ten keep it far under 100 ms.
PAGE_TASKS = 10
# What answering needs of a request's task and server: not their large columns (a 40 MB tool list).
_LARGE = [
    *(f"task__{column}" for column in LARGE_TASK_COLUMNS),
    *(f"task__server__{column}" for column in LARGE_SERVER_COLUMNS),
]
# What the list shows: not the secrets either.
_DEFERRED = [*_LARGE, "task__remote_id_encrypted", "task__server__headers_encrypted"]


def _open() -> Any:
    return InputRequest.objects.filter(
        state="open", task__expired=False, task__server__enabled=True, task__server__archived=False
    ).exclude(
        task__status__in=("completed", "failed", "cancelled")
    )


def open_requests() -> list[InputRequest]:
    """Every open request, most urgent first: least TTL left, then oldest."""
    rows = list(_open().select_related("task__server").defer(*_DEFERRED)[:INBOX_LIMIT])

    def urgency(row: InputRequest) -> tuple[float, float]:
        deadline = row.task.ttl_deadline
        return (deadline.timestamp() if deadline else float("inf"), row.first_seen_at.timestamp())

    return sorted(rows, key=urgency)


def tasks_by_urgency() -> list[int]:
    """Ids of the tasks with open requests, the most urgent first (least TTL left, then the oldest
    request): ranked from four narrow columns, so 1,000 open requests cost one small query."""
    best: dict[int, tuple[float, float]] = {}
    for task_id, ttl_ms, created, first_seen in _open().values_list(
        "task_id", "task__ttl_ms", "task__remote_created_at", "first_seen_at"
    ):
        deadline = created.timestamp() + ttl_ms / 1000 if ttl_ms is not None and created else float("inf")
        rank = (deadline, first_seen.timestamp())
        best[task_id] = min(rank, best.get(task_id, rank))
    return sorted(best, key=lambda task_id: (best[task_id], task_id))


def inbox_items(task_ids: list[int]) -> list[dict[str, Any]]:
    """The page's tasks, in the given order, each with its open requests as views (one query)."""
    groups: dict[int, list[InputView]] = {task_id: [] for task_id in task_ids}
    tasks = {}
    for row in _open().filter(task_id__in=task_ids).select_related("task__server").defer(*_DEFERRED):
        groups[row.task_id].append(input_view(row))
        tasks[row.task_id] = row.task
    return [{"task": tasks[task_id], "inputs": groups[task_id]} for task_id in task_ids if task_id in tasks]


@require(VIEW)
def inbox(request: HttpRequest) -> HttpResponse:
    ranked = Paginator(tasks_by_urgency(), PAGE_TASKS).get_page(request.GET.get("page"))
    context = {
        "items": inbox_items(list(ranked.object_list)),
        "page_obj": ranked,
        "inbox_next": request.get_full_path(),
        "now": time.time(),
    }
    return page(request, "tasksapp/inbox.html", context, nav="inbox", live={"page": "inbox"})


@require(ANSWER)
def answer(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(InputRequest.objects.select_related("task__server").defer(*_LARGE), pk=pk)
    back = safe_next(request, f"/tasks/{row.task_id}/")
    if request.method != "POST":
        return redirect(back)
    response, view = build_response(row, request.POST)
    if response is None:
        messages.error(request, "Please correct the answer below; nothing was sent.")
        context = {"task": row.task, "view": view, "next": back}
        return page(request, "tasksapp/answer_again.html", context, nav="inbox", status=422)
    try:
        services.task_answer(task=row.task, key=row.key, response=response, user=request.user)
        messages.success(request, f"Answer sent to {row.task.server.name} for task #{row.task_id}.")
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect(back)


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
    pending = get_object_or_404(PendingCall.objects.select_related("server"), pk=pk)
    if request.method != "POST":
        return redirect("tasks:pending", pk=pk)
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
        messages.info(request, "The server needs more input before it can start.")
        return redirect("tasks:pending", pk=started.pending.pk)
    return redirect("tasks:pending", pk=pk)  # a result: shown there, and a reload sends nothing again


def _pending_views(pending: PendingCall, data: Any = None) -> list[tuple[str, InputView]]:
    """MRTR requests are not rows; present them like a task's, keyed by position."""
    views = []
    for index, (key, raw) in enumerate(sorted(pending.input_requests.items())):
        stand_in = InputRequest(
            pk=index + 1, method=str(raw.get("method", "")), params=raw.get("params") or {}
        )
        views.append((key, input_view(stand_in, data=data)))
    return views
