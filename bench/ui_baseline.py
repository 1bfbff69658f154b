"""The overview and inbox views as they were before issue 13 (main at c8f96f9), for bench/ui.py's
`loaded` runs: measured in the same process and run as today's views, through the same middleware
and templates, mounted at /bench-baseline/… .

What is "before" is the work those views did: the overview aggregated every task for its tiles,
bucketed every recent task per hour for its chart and sorted every active task for the longest
running; the inbox loaded 500 open requests with their tasks and servers and rendered every one.
Today's templates need more context than those views gave (the chart's range labels, the answer
times, the inbox's pager and filters): that is filled in here with what costs nothing (constants,
one page holding every item), so that the baseline renders today's markup with yesterday's work.
"""

from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone

from tasksapp.models import TERMINAL, InputRequest, McpServer, RemoteTask
from tasksapp.permissions import VIEW, require
from tasksapp.presenters import inbox as inbox_view
from tasksapp.presenters import overview as overview_view
from tasksapp.presenters.task import InputView, input_view
from tasksapp.views.common import page

TILES = [
    ("working", "working", Q(status="working", expired=False) & Q(cancel_requested_at__isnull=True)),
    ("needs_input", "needs input", Q(status="input_required", expired=False)),
    (
        "cancel_requested",
        "cancel requested",
        Q(cancel_requested_at__isnull=False, expired=False) & ~Q(status__in=TERMINAL),
    ),
    ("completed", "completed", Q(status="completed", is_tool_error=False)),
    ("tool_error", "completed with tool error", Q(status="completed", is_tool_error=True)),
    ("failed", "failed", Q(status="failed")),
    ("cancelled", "cancelled", Q(status="cancelled")),
    ("expired", "expired", Q(expired=True)),
]


@require(VIEW)
def overview(request: HttpRequest) -> HttpResponse:
    return page(
        request, "tasksapp/overview.html", overview_context(), nav="overview", live={"page": "overview"}
    )


def overview_context() -> dict[str, Any]:
    now = timezone.now()
    counts = RemoteTask.objects.aggregate(**{key: Count("id", filter=cond) for key, _, cond in TILES})
    return {
        "tiles": [{"key": key, "label": label, "count": counts[key]} for key, label, _ in TILES],
        "servers": list(McpServer.objects.defer("tools", "capabilities", "instructions")),
        "workers": overview_view.workers_shown(now),
        "long_running": list(RemoteTask.objects.for_list().active().order_by("created_at")[:10]),
        "chart": hourly_chart(now),
        "answer_times": [],  # not on the page before issue 13
        "answer_sample": overview_view.ANSWER_SAMPLE,
        "now": now,
    }


def hourly_chart(now: datetime) -> dict[str, Any]:
    """Counted from the task rows, as before; shaped as today's template draws it."""
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    started = _per_hour(RemoteTask.objects.filter(created_at__gte=start), "created_at")
    finished = _per_hour(RemoteTask.objects.filter(finished_at__gte=start), "finished_at")
    peak = max([1, *started.values(), *finished.values()])
    height, slot = overview_view.CHART_HEIGHT, overview_view.CHART_SLOT
    bars = []
    for i in range(24):
        hour = start + timedelta(hours=i)
        s, f = started.get(hour, 0), finished.get(hour, 0)
        bars.append(
            {
                "x": i * slot + 4,
                "label": hour.strftime("%H"),
                "tick": hour.hour % 3 == 0,
                "major": hour.hour % 6 == 0,
                "range": f"{hour:%H:%M}-{hour + timedelta(hours=1):%H:%M}",
                "started": s,
                "finished": f,
                "h_started": round(height * s / peak),
                "h_finished": round(height * f / peak),
                "y_started": height - round(height * s / peak),
                "y_finished": height - round(height * f / peak),
            }
        )
    return {
        "bars": bars,
        "peak": peak,
        "total_started": sum(started.values()),
        "total_finished": sum(finished.values()),
        "zone": "UTC",
        "width": slot * 24,
        "half": height // 2,
    }


def _per_hour(queryset: Any, field: str) -> dict[Any, int]:
    rows = queryset.annotate(hour=TruncHour(field)).values("hour").annotate(n=Count("id"))
    return {row["hour"]: row["n"] for row in rows}


def open_requests() -> list[InputRequest]:
    rows = list(
        InputRequest.objects.filter(state="open", task__expired=False, task__server__enabled=True)
        .exclude(task__status__in=("completed", "failed", "cancelled"))
        .select_related("task__server")[:500]
    )

    def urgency(row: InputRequest) -> tuple[float, float]:
        deadline = row.task.ttl_deadline
        return (deadline.timestamp() if deadline else float("inf"), row.first_seen_at.timestamp())

    return sorted(rows, key=urgency)


@require(VIEW)
def inbox(request: HttpRequest) -> HttpResponse:
    groups: dict[int, list[InputView]] = {}
    tasks = {}
    for row in open_requests():
        groups.setdefault(row.task_id, []).append(input_view(row))
        tasks[row.task_id] = row.task
    items = [{"task": tasks[task_id], "inputs": views} for task_id, views in groups.items()]
    context = {
        "items": items,
        "calls": [],
        "page_obj": Paginator(items, max(1, len(items))).get_page(1),  # every item on one page, as before
        "filters": {"server": "", "tool": "", "kind": ""},
        "filtered": False,
        "ignored": [],
        "kinds": inbox_view.KINDS,
        "servers": [],
        "query": "",
        "inbox_next": request.get_full_path(),
        "now": timezone.now().timestamp(),
        "picked_all": False,
    }
    return page(request, "tasksapp/inbox.html", context, nav="inbox", live={"page": "inbox"})


def mount() -> None:
    """Add /bench-baseline/ and /bench-baseline/inbox/ to the URLconf of this process."""
    from importlib import import_module

    from django.conf import settings
    from django.urls import clear_url_caches

    urls: Any = import_module(settings.ROOT_URLCONF)
    urls.urlpatterns += [
        path("bench-baseline/", overview),
        path("bench-baseline/inbox/", inbox),
    ]
    clear_url_caches()
