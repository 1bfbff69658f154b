"""What the overview shows, read for its page (tasksapp/views/overview.py) and its live part
(tasksapp/live/pages.py): counts per status, server and worker health, throughput over the last day.

Every part is bounded whatever the number of tasks: the tiles and the chart read the counts the
database triggers keep (tasksapp.counts), the longest-running tasks are the oldest few of each
active status read in index order.
"""

from datetime import datetime, timedelta
from html import escape
from typing import Any

from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from tasksapp import counts
from tasksapp.lib.prepared import Prepared
from tasksapp.models import InputRequest, McpServer, RemoteTask, WorkerHeartbeat
from tasksapp.presenters.task_card import badge
from tasksapp.presenters.times import ago, running_for

LONG_RUNNING = 10
ANSWER_SAMPLE = 2000  # the latest answered input requests the time-to-answer percentiles read
STOPPED_SHOWN = timedelta(minutes=10)
CHART_SLOT, CHART_HEIGHT = 30, 100  # the chart's SVG: one 30-unit slot per hour, bars 0-100 high


def overview_context() -> dict[str, Any]:
    now = timezone.now()
    return {
        "tiles": counts.status_tiles(),
        "servers": _servers.all(),
        "workers": workers_shown(now),
        "long_running": long_running(),
        "chart": hourly_chart(now),
        "answer_times": answer_times(),
        "answer_sample": ANSWER_SAMPLE,
        "now": now,
    }


def servers_shown() -> "QuerySet[McpServer]":
    """Every server with its authorization row in the same query (the OAuth badge reads it): one
    query whatever the number of servers."""
    return McpServer.objects.defer("tools", "capabilities", "instructions").select_related("authorization")


_servers = Prepared(servers_shown, 0)


def workers_shown(now: datetime) -> list[WorkerHeartbeat]:
    """The workers panel: every live worker; one that stopped cleanly for STOPPED_SHOWN after it said so
    (its figures are gone with it); one that fell silent without saying so for a day (an incident)."""
    return _workers.all(now - timedelta(days=1), now - STOPPED_SHOWN)


def _workers_since(beat_after: datetime, stopped_after: datetime) -> "QuerySet[WorkerHeartbeat]":
    silent = Q(stopped_at__isnull=True, last_beat_at__gte=beat_after)
    return WorkerHeartbeat.objects.filter(silent | Q(stopped_at__gte=stopped_after))[:20]


_workers = Prepared(_workers_since, 2)


def long_running() -> list[RemoteTask]:
    """The oldest active tasks: the first few of each active status, merged. Each is read in the order
    of index task_status_age and stops after a few rows; the servers are a subquery, not a join, or
    SQLite loops over servers outside and sorts every active task of each (about 15 ms at 100k tasks).
    Compiled once per thread (tasksapp/lib/prepared.py): the ORM's compilation of the two queries was
    most of the overview's reads."""
    oldest = [*_oldest.all("working"), *_oldest.all("input_required")]
    return sorted(oldest, key=lambda task: (task.created_at, task.pk))[:LONG_RUNNING]


def _oldest_of(status: str) -> "QuerySet[RemoteTask]":
    watched = McpServer.objects.watched().values("pk")
    rows = RemoteTask.objects.for_list().filter(status=status, expired=False, server_id__in=watched)
    return rows.order_by("created_at")[:LONG_RUNNING]


_oldest = Prepared(_oldest_of, 1)


def hourly_chart(now: datetime) -> dict[str, Any]:
    """Started and finished per hour over the last 24 hours, as bars for a server-side SVG; hours are
    labelled in the reader's zone (the counts are kept per UTC hour; every zone in use today is a
    whole number of hours away, apart from a few at :30 and :45, whose labels then say so)."""
    start = (now - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    started, finished = counts.per_hour(start)
    hours = [start + timedelta(hours=i) for i in range(24)]
    peak = max([1, *started.values(), *finished.values()])
    bars = []
    for i, hour in enumerate(hours):
        s, f = started.get(hour, 0), finished.get(hour, 0)
        local = timezone.localtime(hour)
        bars.append(
            {
                "x": i * CHART_SLOT + 4,
                "label": local.strftime("%H") if local.minute == 0 else local.strftime("%H:%M"),
                # Labels every third hour (every sixth on a phone: app.css), whatever the zone's offset.
                "tick": local.hour % 3 == 0,
                "major": local.hour % 6 == 0,
                "range": f"{local:%H:%M}-{timezone.localtime(hour + timedelta(hours=1)):%H:%M}",
                "started": s,
                "finished": f,
                "h_started": round(CHART_HEIGHT * s / peak),
                "h_finished": round(CHART_HEIGHT * f / peak),
                "y_started": CHART_HEIGHT - round(CHART_HEIGHT * s / peak),
                "y_finished": CHART_HEIGHT - round(CHART_HEIGHT * f / peak),
            }
        )
    return {
        "bars": bars,
        "peak": peak,
        "total_started": sum(started.values()),
        "total_finished": sum(finished.values()),
        "zone": timezone.get_current_timezone_name(),
        "width": CHART_SLOT * 24,
        "half": CHART_HEIGHT // 2,
    }


def chart_html(chart: dict[str, Any]) -> SafeString:
    """The hourly chart's card (hourly_chart()'s figures as an SVG of bars), byte for byte what
    overview.html wrote with the template engine: 24 bars of two counted phrases each were the
    overview's largest loop, and its live part renders it every second per audience. The figures
    are the dashboard's own numbers; the zone and hour labels are escaped."""
    zone = escape(chart["zone"])
    started, finished = chart["total_started"], chart["total_finished"]
    width = chart["width"]
    bars = []
    for bar in chart["bars"]:
        title = (
            escape(bar["range"])
            + ": "
            + ngettext("%(counter)s started", "%(counter)s started", bar["started"])
            % {"counter": bar["started"]}
            + ", "
            + ngettext("%(counter)s finished", "%(counter)s finished", bar["finished"])
            % {"counter": bar["finished"]}
        )
        x, label = bar["x"], escape(bar["label"])
        started_rect = f'x="{x}" y="{bar["y_started"]}" width="11" height="{bar["h_started"]}"'
        finished_rect = f'x="{x + 11}" y="{bar["y_finished"]}" width="11" height="{bar["h_finished"]}"'
        bars.append(
            f'<g class="bar" data-hour="{label}"><title>{title}</title>\n'
            f'        <rect class="started" {started_rect}></rect>\n'
            f'        <rect class="finished" {finished_rect}></rect></g>\n'
            "      "
        )
    ticks = "".join(
        f'<li class="{"tick" if bar["tick"] else ""}{" major" if bar["major"] else ""}">'
        f"{escape(bar['label'])}</li>"
        for bar in chart["bars"]
    )
    described = (
        ngettext("%(counter)s task started", "%(counter)s tasks started", started) % {"counter": started}
        + ", "
        + ngettext("%(counter)s finished", "%(counter)s finished", finished) % {"counter": finished}
        + " "
        + _("in the last 24 hours")
    )
    half = chart["half"]
    # The words outside the f-strings: makemessages does not read calls inside them.
    started_word, finished_word = _("started"), _("finished")
    hours_word = _("hour of day (%(zone)s)") % {"zone": zone}
    parts = [
        '<div class="card chart spaced" id="hourly-chart"><h2 id="chart-title">',
        _("Tasks started and finished per hour (last 24 h, %(zone)s)") % {"zone": zone},
        "</h2>\n",
        '  <div class="chart-plot">\n',
        f'    <div class="chart-y" aria-hidden="true"><span>{chart["peak"]}</span><span>0</span></div>\n',
        f'    <svg class="chart-bars" viewBox="0 0 {width} 100" preserveAspectRatio="none" role="img"'
        ' aria-labelledby="chart-title chart-desc">\n',
        f'      <desc id="chart-desc">{described}</desc>\n',
        f'      <line class="gridline" x1="0" y1="0" x2="{width}" y2="0"></line>'
        f'<line class="gridline" x1="0" y1="{half}" x2="{width}" y2="{half}"></line>'
        f'<line class="baseline" x1="0" y1="100" x2="{width}" y2="100"></line>\n',
        "      ",
        *bars,
        "\n    </svg>\n",
        f'    <ol class="chart-x" aria-hidden="true">{ticks}</ol>\n',
        "  </div>\n",
        '  <p class="chart-legend"><span class="legend-started">',
        f"{started_word} ({started})</span> ",
        f'<span class="legend-finished">{finished_word} ({finished})</span> ',
        f"<span>{hours_word}</span></p>\n",
        "</div>",
    ]
    return mark_safe("".join(parts))  # noqa: S308 (the zone and labels are escaped; the rest are numbers)


def answer_times() -> list[dict[str, Any]]:
    """Time to answer (first seen → answered) p50 and p90 per server, over the latest ANSWER_SAMPLE
    answered input requests: one query, bounded whatever the number of requests."""
    waits: dict[str, list[float]] = {}
    for server, seen, answered in _answered.all():
        if answered is None:
            continue
        waits.setdefault(server, []).append(max(0.0, (answered - seen).total_seconds()))
    return [
        {"server": server, "count": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90)}
        for server, values in sorted(waits.items())
    ]


_answered = Prepared(
    lambda: (
        InputRequest.objects.filter(answered_at__isnull=False)
        .order_by("-id")
        .values_list("task__server__name", "first_seen_at", "answered_at")[:ANSWER_SAMPLE]
    ),
    0,
)


def percentile(values: list[float], rank: int) -> float:
    """The nearest-rank percentile: the smallest value with at least `rank`% of values at or below it."""
    ordered = sorted(values)
    index = max(0, -(-rank * len(ordered) // 100) - 1)
    return ordered[min(index, len(ordered) - 1)]


_SLOT = 9_876_543_210  # a task id no URL prefix holds: where the id goes in the task page's URL
_LONG_ROW = (
    '<tr><td class="nowrap" data-label=""><a href="{url}">#{pk} {tool}</a>{agent}</td>\n'
    '    <td class="nowrap" data-label="">{badge}</td><td class="num" data-label="">{running}</td>\n'
    '    <td class="small" data-label="">{message}{seen}</td></tr>\n    '
)


def tiles_html(tiles: list[dict[str, Any]]) -> SafeString:
    """The overview's status tiles, byte for byte what its template's loop wrote
    (tests/views/test_overview_rows.py keeps it as the reference)."""
    url = reverse("tasks:list")
    shown = []
    for tile in tiles:
        key, zero = escape(str(tile["key"])), "" if tile["count"] else " zero"
        shown.append(
            f'<a class="tile{zero}" href="{url}?status={key}" data-tile="{key}">'
            f"<b>{tile['count']}</b>{escape(str(tile['label']))}</a>"
        )
    return mark_safe("".join(shown))  # noqa: S308 (the dashboard's own keys and words, escaped anyway)


def long_running_html(tasks: list[RemoteTask]) -> SafeString:
    """The overview's longest-running tasks as table rows, byte for byte what overview.html's loop
    (with _badge.html) wrote: tests/views/test_overview_rows.py keeps it as the reference. Ten rows
    cost about 3 ms in the template engine. Names and messages from servers and agents are escaped."""
    if not tasks:
        nothing = _("Nothing running.")
        return mark_safe(f'<tr><td class="empty">{nothing}</td></tr>')  # noqa: S308 (our words)
    url = reverse("tasks:detail", args=[_SLOT])
    by_agent, changed, confirmed = _("by agent %(who)s"), _("changed %(changed)s"), None
    rows = []
    for task in tasks:
        agent = ""
        if task.agent_id:
            who = escape(getattr(task.agent, "name", ""))
            agent = f'<br><span class="small muted starter">{by_agent % {"who": who}}</span>'
        seen = ""
        if task.last_seen_at:
            if task.last_confirmed_at:
                confirmed = confirmed or _("changed %(changed)s, confirmed %(confirmed)s")
                words = confirmed % {
                    "changed": ago(task.last_seen_at),
                    "confirmed": ago(task.last_confirmed_at),
                }
            else:
                words = changed % {"changed": ago(task.last_seen_at)}
            seen = f' <span class="muted">({words})</span>'
        rows.append(
            _LONG_ROW.format(
                url=url.replace(str(_SLOT), str(task.pk)),
                pk=task.pk,
                tool=escape(task.tool_name),
                agent=agent,
                badge=badge(task),
                running=running_for(task.created_at),
                message=escape(Truncator(str(task.status_message)).chars(100)),
                seen=seen,
            )
        )
    return mark_safe("".join(rows))  # noqa: S308 (escaped above)
