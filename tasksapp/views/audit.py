"""The audit log: who did what, filtered by user, server, action and date, and exported."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse

from tasksapp import exports, services
from tasksapp.models import McpServer, OperatorAction
from tasksapp.permissions import VIEW, require
from tasksapp.queryparams import bad_ids, parse_id
from tasksapp.search import day_end, day_start
from tasksapp.views.common import not_cross_site, page

PAGE_SIZE = 100
FILTERS = ("user", "server", "action", "from", "to")
ID_FILTERS = ("user", "server")


@require(VIEW)
def audit_log(request: HttpRequest) -> HttpResponse:
    filters = _filters(request.GET)
    entries = _filtered(filters).select_related("user", "server")
    current = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    ignored = bad_ids(filters, ID_FILTERS)
    query = request.GET.copy()
    for key in ("page", *ignored):  # the pager adds its own page; the links never carry bad ids
        query.pop(key, None)
    context = {
        "page_obj": current,
        "filters": filters,
        "query": query.urlencode(),
        "choices": OperatorAction.Action.choices,
        "users": get_user_model().objects.order_by("username").only("id", "username"),
        "servers": McpServer.objects.order_by("name").only("id", "name"),
        "ignored": [(key, filters[key]) for key in ignored],
    }
    return page(request, "tasksapp/audit.html", context, nav="audit")


@require(VIEW)
@not_cross_site
def audit_export(request: HttpRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    if fmt not in exports.FORMATS:
        raise Http404("Export as csv or jsonl.")
    filters = _filters(request.GET)
    if ignored := bad_ids(filters, ID_FILTERS):
        return exports.bad_filters(ignored, filters)
    given = {key: value for key, value in filters.items() if value}
    services.export_record(user=request.user, detail={"what": "audit", "format": fmt, "filters": given})
    rows = exports.audit_rows(_filtered(filters))
    return exports.streamed(
        rows, exports.AUDIT_COLUMNS, fmt, "audit", asynchronous=exports.under_asgi(request)
    )


def _filters(params: QueryDict) -> dict[str, str]:
    return {key: params.get(key, "").strip()[:100] for key in FILTERS}


def _filtered(filters: dict[str, str]) -> QuerySet[OperatorAction]:
    entries = OperatorAction.objects.order_by("-created_at", "-id")
    lookups: dict[str, Any] = {}
    if (user := parse_id(filters["user"])) is not None:
        lookups["user_id"] = user
    if (server := parse_id(filters["server"])) is not None:
        lookups["server_id"] = server
    if filters["action"] in OperatorAction.Action.values:
        lookups["action"] = filters["action"]
    if start := day_start(filters["from"]):
        lookups["created_at__gte"] = start
    if end := day_end(filters["to"]):
        lookups["created_at__lt"] = end
    return entries.filter(**lookups)
