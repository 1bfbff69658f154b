"""The overview: counts per status, server and worker health, throughput over the last day.

Every part is bounded whatever the number of tasks: the tiles and the chart read the counts the
database triggers keep (tasksapp.counts), the longest-running tasks are the oldest few of each
active status read in index order. `overview_live_html` is what the live refresh sends: rendered
once per interval and role, whatever the number of viewers.
"""

import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone

from tasksapp import counts
from tasksapp.models import McpServer, RemoteTask, WorkerHeartbeat
from tasksapp.permissions import VIEW, require, roles_of
from tasksapp.views.common import page

LONG_RUNNING = 10
LIVE_INTERVAL_SECONDS = 1.0
_render_lock = threading.Lock()


@require(VIEW)
def overview(request: HttpRequest) -> HttpResponse:
    return page(
        request, "tasksapp/overview.html", overview_context(), nav="overview", live={"page": "overview"}
    )


def overview_context() -> dict[str, Any]:
    now = timezone.now()
    return {
        "tiles": counts.status_tiles(),
        "servers": list(McpServer.objects.defer("tools", "capabilities", "instructions")),
        "workers": list(WorkerHeartbeat.objects.filter(last_beat_at__gte=now - timedelta(days=1))[:20]),
        "long_running": long_running(),
        "chart": hourly_chart(now),
        "now": now,
    }


def overview_live_html(user: Any, *, interval: float = LIVE_INTERVAL_SECONDS) -> str:
    """The overview's live partial (an out-of-band swap) for `user`, rendered at most once per
    `interval` per role in this process and shared by every viewer with that role (Django's cache).

    Call it from the consumer's thread pool (it queries the database), e.g.
    `await database_sync_to_async(overview_live_html)(scope["user"])`. The HTML carries no
    per-user secret: only the role's flags decide what it shows.
    """
    roles = roles_of(user)
    role = "".join("1" if allowed else "0" for allowed in roles.values())
    key = f"overview-live:{role}:{int(time.time() // interval)}"
    html = cache.get(key)
    if html is None:
        with _render_lock:  # viewers arriving together wait for one render instead of each rendering
            html = cache.get(key)
            if html is None:
                html = render_to_string(
                    "tasksapp/overview.html#overview-live", {**overview_context(), "oob": True, **roles}
                )
                cache.set(key, html, timeout=max(1, round(2 * interval)))
    return str(html)


def long_running() -> list[RemoteTask]:
    """The oldest active tasks: the first few of each active status, merged. Each is read in the order
    of index task_status_age and stops after a few rows; the servers are a subquery, not a join, or
    SQLite loops over servers outside and sorts every active task of each (about 15 ms at 100k tasks)."""
    watched = McpServer.objects.filter(enabled=True, archived=False).values("pk")  # as active()
    oldest: list[RemoteTask] = []
    for status in ("working", "input_required"):
        rows = RemoteTask.objects.for_list().filter(status=status, expired=False, server_id__in=watched)
        oldest += rows.order_by("created_at")[:LONG_RUNNING]
    return sorted(oldest, key=lambda task: (task.created_at, task.pk))[:LONG_RUNNING]


def hourly_chart(now: datetime) -> dict[str, Any]:
    """Started and finished per hour over the last 24 hours, as bars for a server-side SVG."""
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    started, finished = counts.per_hour(start)
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
