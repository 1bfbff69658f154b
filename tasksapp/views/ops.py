"""Operations: /metrics and /healthz for machines, task-list exports and archiving servers for people."""

import hmac

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from tasksapp import exports, healthcheck, metrics, search, services
from tasksapp.models import McpServer
from tasksapp.permissions import CANCEL, MANAGE_SERVERS, VIEW, can, require
from tasksapp.views.common import not_cross_site, page


@login_not_required
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for a scraper holding METRICS_TOKEN or a logged-in viewer."""
    if not (_token_ok(request) or can(request.user, VIEW)):
        response = HttpResponse("Send 'Authorization: Bearer <METRICS_TOKEN>', or log in.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


def _token_ok(request: HttpRequest) -> bool:
    token: str = settings.METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 or 503 for load balancers, naming the failed checks; ?require=workers also fails when no
    worker is alive. The figures only for METRICS_TOKEN or a signed-in viewer (tasksapp.healthcheck)."""
    healthy, report = healthcheck.health(require_workers=request.GET.get("require") == "workers")
    if not (_token_ok(request) or can(request.user, VIEW)):
        report = healthcheck.public(report)
    return JsonResponse(report, status=200 if healthy else 503)


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
    rows = exports.task_rows(tasks, with_task_ids=with_ids)
    return exports.streamed(
        rows,
        exports.task_columns(with_task_ids=with_ids),
        fmt,
        "tasks",
        asynchronous=exports.under_asgi(request),
    )


def _given(filters: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in filters.items() if value}


@require(MANAGE_SERVERS)
def server_archive(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: what archiving (or bringing back) means, with one button; POST: do it."""
    server = get_object_or_404(McpServer.objects.only("id", "name", "archived", "enabled"), pk=pk)
    if request.method != "POST":
        open_tasks = server.tasks.exclude(status__in=("completed", "failed", "cancelled")).count()
        context = {"server": server, "open_tasks": open_tasks}
        return page(request, "tasksapp/server_archive.html", context, nav="servers")
    change = services.server_unarchive if server.archived else services.server_archive
    try:
        change(server=server, user=request.user)
        if server.archived:
            done = _("Server %(name)s archived: kept read-only, never polled.")
        else:
            done = _("Server %(name)s back: it is polled again.")
        messages.success(request, done % {"name": server.name})
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("tasks:servers")
