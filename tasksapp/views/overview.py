"""The overview: counts per status, server and worker health, throughput over the last day."""

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from tasksapp.models import STALE, TERMINAL, McpServer, RemoteTask, WorkerHeartbeat
from tasksapp.permissions import VIEW, require
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
    ("stale", "stale (server failing or off)", STALE & Q(expired=False) & ~Q(status__in=TERMINAL)),
]


@require(VIEW)
def overview(request: HttpRequest) -> HttpResponse:
    return page(
        request, "tasksapp/overview.html", overview_context(), nav="overview", live={"page": "overview"}
    )


def overview_context() -> dict[str, Any]:
    now = timezone.now()
    return {
        "tiles": status_tiles(),
        "servers": list(McpServer.objects.defer("tools", "capabilities", "instructions")),
        "workers": list(WorkerHeartbeat.objects.filter(last_beat_at__gte=now - timedelta(days=1))[:20]),
        "long_running": list(RemoteTask.objects.for_list().active().order_by("created_at")[:10]),
        "chart": hourly_chart(now),
        "now": now,
    }


def status_tiles() -> list[dict[str, Any]]:
    # Aliases apart from field names: a tile's filter may use `expired` after the "expired" tile.
    counts = RemoteTask.objects.aggregate(**{f"n_{key}": Count("id", filter=cond) for key, _, cond in TILES})
    return [{"key": key, "label": label, "count": counts[f"n_{key}"]} for key, label, _ in TILES]


def hourly_chart(now: Any) -> dict[str, Any]:
    """Started and finished per hour over the last 24 hours, as bars for a server-side SVG."""
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    started = _per_hour(RemoteTask.objects.filter(created_at__gte=start), "created_at")
    finished = _per_hour(RemoteTask.objects.filter(finished_at__gte=start), "finished_at")
    hours = [start + timedelta(hours=i) for i in range(24)]
    peak = max([1, *started.values(), *finished.values()])
    bars = []
    for i, hour in enumerate(hours):
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
