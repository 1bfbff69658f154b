"""The overview and inbox views as they were before issue 13 (main at c8f96f9), for bench/ui.py's
`loaded` runs: measured in the same process and run as today's views, through the same middleware
and templates, mounted at /bench-baseline/… ."""

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone

from tasksapp.models import TERMINAL, InputRequest, McpServer, RemoteTask, WorkerHeartbeat
from tasksapp.permissions import VIEW, require
from tasksapp.views.common import page
from tasksapp.views.present import InputView, input_view

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
        "workers": list(WorkerHeartbeat.objects.filter(last_beat_at__gte=now - timedelta(days=1))[:20]),
        "long_running": list(RemoteTask.objects.for_list().active().order_by("created_at")[:10]),
        "chart": hourly_chart(now),
        "now": now,
    }


def hourly_chart(now: Any) -> dict[str, Any]:
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    started = _per_hour(RemoteTask.objects.filter(created_at__gte=start), "created_at")
    finished = _per_hour(RemoteTask.objects.filter(finished_at__gte=start), "finished_at")
    peak = max([1, *started.values(), *finished.values()])
    bars = []
    for i in range(24):
        hour = start + timedelta(hours=i)
        s, f = started.get(hour, 0), finished.get(hour, 0)
        bars.append(
            {
                "x": 30 + i * 27,
                "label": hour.strftime("%H"),
                "started": s,
                "finished": f,
                "h_started": round(100 * s / peak),
                "h_finished": round(100 * f / peak),
                "y_started": 110 - round(100 * s / peak),
                "y_finished": 110 - round(100 * f / peak),
            }
        )
    return {
        "bars": bars,
        "peak": peak,
        "total_started": sum(started.values()),
        "total_finished": sum(finished.values()),
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
    return page(request, "tasksapp/inbox.html", {"items": items}, nav="inbox", live={"page": "inbox"})


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
