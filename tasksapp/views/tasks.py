"""The task list, its exports (csv, jsonl), a task's page, cancelling, and its raw JSON."""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp import exports, search, services
from tasksapp.lib import crypto
from tasksapp.models import Agent, McpServer, RemoteTask
from tasksapp.permissions import CANCEL, VIEW, can, require
from tasksapp.presenters import task_rows
from tasksapp.presenters.task import SHOW_LIMIT, detail_task, task_context
from tasksapp.queryparams import parse_count
from tasksapp.views.common import not_cross_site, page

PAGE_SIZE = 50
STATUS_FILTERS = [
    ("active", gettext_lazy("active")),
    ("working", gettext_lazy("working")),
    ("needs_input", gettext_lazy("needs input")),
    ("completed", gettext_lazy("completed")),
    ("tool_error", gettext_lazy("completed with tool error")),
    ("failed", gettext_lazy("failed")),
    ("cancelled", gettext_lazy("cancelled")),
    ("cancel_requested", gettext_lazy("cancel requested")),
    ("expired", gettext_lazy("expired")),
    ("stale", gettext_lazy("stale (server failing or off)")),
]
# The pager's words: "older" and "newer" only when the list is sorted by age.
PAGER_WORDS = {
    "-created": (gettext_lazy("newer"), gettext_lazy("older")),
    "created": (gettext_lazy("older"), gettext_lazy("newer")),
}


@require(VIEW)
def task_list(request: HttpRequest) -> HttpResponse:
    filters = search.filters_from(request.GET)
    sorting = search.parse_sort(request.GET.get("sort", search.DEFAULT_SORT))
    sort = sorting.value
    ordered = search.ordered(search.filtered(filters, RemoteTask.objects.for_rows()), sorting)
    current = Paginator(ordered, PAGE_SIZE).get_page(request.GET.get("page"))
    ignored = search.ignored(filters)
    query = request.GET.copy()
    for key in ("page", "sort", "picked", *ignored):  # the links add their own page and sort; never bad ids
        query.pop(key, None)
    earlier, later = PAGER_WORDS.get(sort, (gettext_lazy("previous"), gettext_lazy("next")))
    picked_all = request.GET.get("picked") == "all"  # "select all" without JavaScript
    context = {
        "page_obj": current,
        "rows": task_rows.rows_html(current, picked_all=picked_all),
        "filters": filters,
        "status_filters": STATUS_FILTERS,
        "sort": sort,
        "servers": McpServer.objects.order_by("name").only("id", "name"),
        "users": get_user_model().objects.order_by("username").only("id", "username"),
        "agents": Agent.objects.order_by("name").only("id", "name"),
        "sorting": sorting,
        "sort_options": search.sort_options(),
        "query": query.urlencode(),
        "earlier": earlier,
        "later": later,
        "ignored": [(key, filters[key]) for key in ignored],
        "picked_all": picked_all,
    }
    fresh = not any(filters.values()) and current.number == 1 and sort == "-created"
    # A fresh page names its rows: a change to a task it does not show adds the row at the top.
    rows = ",".join(str(task.pk) for task in current)
    live = {"page": "tasks", "fresh": "1", "rows": rows} if fresh else {"page": "tasks"}
    return page(request, "tasksapp/task_list.html", context, nav="tasks", live=live)


@require(VIEW)
@not_cross_site
def task_export(request: HttpRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """The filtered, sorted task list as a streamed download; task ids only for who may act on tasks.
    A filter that is not an id is a 400 naming it (a download has no page to say it was ignored)."""
    if fmt not in exports.FORMATS:
        raise Http404("Export as csv or jsonl.")
    filters = search.filters_from(request.GET)
    if ignored := search.ignored(filters):
        return exports.bad_filters(ignored, filters)
    sort = search.parse_sort(request.GET.get("sort", search.DEFAULT_SORT))
    tasks = search.ordered(search.filtered(filters), sort)
    with_ids = can(request.user, CANCEL)
    detail = {"what": "tasks", "format": fmt, "filters": _given(filters), "sort": sort.value}
    services.export_record(user=request.user, detail={**detail, "with_task_ids": with_ids})
    return exports.tasks_streamed(
        tasks, fmt, "tasks", with_task_ids=with_ids, asynchronous=exports.under_asgi(request)
    )


def _given(filters: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in filters.items() if value}


@require(VIEW)
def task_find(request: HttpRequest) -> HttpResponse:
    """Find a task by its taskId, a bearer secret: POSTed, so the id never lands in a URL or a log."""
    text = request.POST.get("task_id", "").strip()[:1000] if request.method == "POST" else ""
    found = text and RemoteTask.objects.filter(remote_id_hash__in=crypto.fingerprints(text)).first()
    if found:
        return redirect("tasks:detail", pk=found.pk)
    if text:
        messages.error(request, _("No task has that id."))
    return redirect("tasks:list")


@require(VIEW)
def task_detail(request: HttpRequest, pk: int) -> HttpResponse:
    task = detail_task(pk)
    if task is None:
        raise Http404("No such task.")
    show = parse_count(request.GET.get("show"), limit=SHOW_LIMIT)
    # The socket keeps the timeline as long as this page shows it ("show older": docs/live.md).
    live = {"page": "task", "task": str(task.pk), **({"show": str(show)} if show else {})}
    return page(
        request,
        "tasksapp/task_detail.html",
        task_context(task, request.user, show=show),
        nav="tasks",
        live=live,
    )


@require(CANCEL)
def task_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(RemoteTask.objects.for_detail(), pk=pk)
    if request.method != "POST":
        return page(request, "tasksapp/task_cancel.html", {"task": task}, nav="tasks")
    try:
        services.task_cancel(task=task, user=request.user)
        messages.success(
            request,
            _("Cancel requested for task #%(pk)s. It shows as cancelled once the server confirms.")
            % {"pk": task.pk},
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("tasks:detail", pk=task.pk)


@require(VIEW)
def task_raw(request: HttpRequest, pk: int) -> HttpResponse:
    """The last snapshot as a download. The taskId (a bearer secret) only for who may act on it."""
    task = get_object_or_404(RemoteTask.objects.for_detail(), pk=pk)
    data = {**task.raw, "result": task.result, "error": task.error, "status": task.status}
    if can(request.user, CANCEL):
        try:
            data = {"taskId": task.remote_id, **data}
        except crypto.SecretUnreadable as exc:
            data = {"taskId": None, "taskIdUnreadable": str(exc), **data}
    response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="task-{task.pk}.json"'
    return response
