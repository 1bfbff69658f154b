"""The task list, a task's page, cancelling, and its raw JSON."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect

from tasksapp import crypto, services
from tasksapp.models import McpServer, RemoteTask, RemoteTaskQuerySet
from tasksapp.permissions import CANCEL, VIEW, can, require
from tasksapp.views.common import page
from tasksapp.views.present import task_context

PAGE_SIZE = 50
STATUS_FILTERS = [
    ("active", "active"),
    ("working", "working"),
    ("needs_input", "needs input"),
    ("completed", "completed"),
    ("tool_error", "completed with tool error"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
    ("cancel_requested", "cancel requested"),
    ("expired", "expired"),
]
SORTS = {"created": "created_at", "status": "status", "tool": "tool_name", "server": "server__name"}


@require(VIEW)
def task_list(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()
    if text and (exact := RemoteTask.objects.filter(remote_id_hash=crypto.fingerprint(text)).first()):
        # A task id is a bearer secret: leave the URL that carries it at once for the task's own page.
        return redirect("tasks:detail", pk=exact.pk)
    tasks, filters = _filtered(request)
    sort = request.GET.get("sort", "-created")
    field = SORTS.get(sort.lstrip("-"), "created_at")
    ordered = tasks.order_by(f"-{field}" if sort.startswith("-") else field, "-id")
    current = Paginator(ordered, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page_obj": current,
        "filters": filters,
        "status_filters": STATUS_FILTERS,
        "sort": sort,
        "servers": McpServer.objects.order_by("name").only("id", "name"),
        "query": query.urlencode(),
    }
    fresh = not any(filters.values()) and current.number == 1 and sort == "-created"
    live = {"page": "tasks", "fresh": "1"} if fresh else {"page": "tasks"}
    return page(request, "tasksapp/task_list.html", context, nav="tasks", live=live)


def _filtered(request: HttpRequest) -> tuple[RemoteTaskQuerySet, dict[str, str]]:
    filters = {key: request.GET.get(key, "").strip()[:200] for key in ("status", "server", "tool", "q")}
    tasks = RemoteTask.objects.for_list()
    if filters["status"]:
        tasks = tasks.with_display_status(filters["status"])
    if filters["server"].isdigit():
        tasks = tasks.filter(server_id=int(filters["server"]))
    if filters["tool"]:
        tasks = tasks.filter(tool_name=filters["tool"])
    if text := filters["q"]:
        # A taskId is a secret stored encrypted: it matches exactly, through its fingerprint.
        tasks = tasks.filter(
            Q(status_message__icontains=text)
            | Q(tool_name__icontains=text)
            | Q(remote_id_hash=crypto.fingerprint(text))
        )
    return tasks, filters


@require(VIEW)
def task_detail(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(RemoteTask.objects.select_related("server", "started_by"), pk=pk)
    return page(
        request,
        "tasksapp/task_detail.html",
        task_context(task, request.user),
        nav="tasks",
        live={"page": "task", "task": str(task.pk)},
    )


@require(CANCEL)
def task_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(RemoteTask.objects.select_related("server"), pk=pk)
    if request.method != "POST":
        return page(request, "tasksapp/task_cancel.html", {"task": task}, nav="tasks")
    try:
        services.task_cancel(task=task, user=request.user)
        messages.success(
            request, f"Cancel requested for task #{task.pk}. It shows as cancelled once the server confirms."
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", pk=task.pk)


@require(VIEW)
def task_raw(request: HttpRequest, pk: int) -> HttpResponse:
    """The last snapshot as a download. The taskId (a bearer secret) only for who may act on it."""
    task = get_object_or_404(RemoteTask.objects.select_related("server"), pk=pk)
    data = {**task.raw, "result": task.result, "error": task.error, "status": task.status}
    if can(request.user, CANCEL):
        data = {"taskId": task.remote_id, **data}
    response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="task-{task.pk}.json"'
    return response
