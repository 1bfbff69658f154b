"""The task list's rows as HTML, for the page (tasksapp/views/tasks.py) and its live updates (the
partial task_list.html#task-row, which tasksapp/live/pages.py renders): one builder, so a row sent
live is byte for byte the row a reload shows.

Written here rather than in the template because a page has 50 rows and the template engine spent
about 0.55 ms on each, in nodes and lookups. The markup is what the template wrote. Everything a
server, an agent or a person chose (tool, message, status, server and agent names) is escaped
(html.escape, what django.utils.html.escape calls, without its lazy-text wrapper); the dashboard's
own words and HTML (translations, times, the stale flag) are not, as the template engine treats them.
"""

import unicodedata
from collections.abc import Iterable
from datetime import datetime
from html import escape
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator, slugify
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from tasksapp.presenters.times import (
    absolute_local,
    elapsed,
    formatted,
    seconds_text,
    stamp_local,
    stamped,
    zone_abbreviation,
)

MESSAGE_CHARS = 120  # the latest message, cut to this many characters
_SLOT = 9_876_543_210  # a task id no URL prefix holds: where the id goes in the task page's URL

_ROW = (
    '\n  <tr id="task-row-{pk}" {oob}>\n'
    '    <td data-label="{select}" class="pick"><input type="checkbox" name="tasks" value="{pk}"'
    ' form="bulk-tasks" aria-label="{pick}"{checked}></td>\n'
    '    <td data-label="#" class="id"><a href="{url}">#{pk}</a></td>\n'
    '    <td data-label="{tool_label}">{tool}{agent}</td>\n'
    '    <td data-label="{server_label}">{server}</td>\n'
    '    <td data-label="{status_label}" class="nowrap">{badge}{stale}</td>\n'
    '    <td data-label="{message_label}" class="message">{message}</td>\n'
    '    <td data-label="{started_label}" class="when small">{started}</td>\n'
    '    <td data-label="{elapsed_label}" class="num">{elapsed}</td>\n'
    "  </tr>\n  "
)


class _Page:
    """What every row of one render shares: the words in the active language, the reader's zone,
    the shape of a task's URL. Read once, not once per row."""

    def __init__(self) -> None:
        self.words = {
            "select": _("Select"),
            "tool_label": _("Tool"),
            "server_label": _("Server"),
            "status_label": _("Status"),
            "message_label": _("Latest message"),
            "started_label": _("Started"),
            "elapsed_label": _("Elapsed"),
        }
        self.pick = _("Select task #%(pk)s")
        self.by_agent = _("by agent %(who)s")
        self.started = _("started %(when)s")
        self.url = reverse("tasks:detail", args=[_SLOT]).split(str(_SLOT))
        self.zone = timezone.get_current_timezone()
        self.zone_name = timezone.get_current_timezone_name()
        self.now = timezone.now()
        self.badges: dict[str, str] = {}


def row_html(task: Any, *, oob: bool = False, picked_all: bool = False) -> SafeString:
    """One row of the list (`oob`: marked for htmx's out-of-band swap; `picked_all`: ticked)."""
    return mark_safe(_row(task, _Page(), oob=oob, picked_all=picked_all))  # noqa: S308 (_row escapes)


def rows_html(tasks: Iterable[Any], *, picked_all: bool = False) -> SafeString:
    """The rows of `tasks`, in order, as one string."""
    page = _Page()
    rows = "".join([_row(task, page, oob=False, picked_all=picked_all) for task in tasks])
    return mark_safe(rows)  # noqa: S308 (_row escapes)


def _row(task: Any, page: _Page, *, oob: bool, picked_all: bool) -> str:
    pk = task.pk
    created = task.created_at
    ended = task.ended_at
    running = not task.is_terminal and not task.expired
    return _ROW.format(
        pk=pk,
        oob='hx-swap-oob="true"' if oob else "",
        pick=page.pick % {"pk": pk},
        checked=" checked" if picked_all else "",
        url=escape(f"{page.url[0]}{pk}{page.url[1]}"),
        tool=escape(task.tool_name),
        agent=(
            f'<br><span class="small muted starter">{page.by_agent % {"who": escape(task.agent.name)}}</span>'
            if task.agent_id
            else ""
        ),
        server=escape(task.server.name),
        badge=_badge(task.display_status, page),
        stale=_stale_mark(task) if running else "",
        message=escape(_message(task.status_message)),
        started=stamp_local(created.astimezone(page.zone), page.zone_name),
        elapsed=escape(elapsed(created, ended)) if ended else _running_for(created, page),
        **page.words,
    )


def _message(text: str) -> str:
    """The truncatechars:120 filter: the text as NFC, cut to 120 characters with an ellipsis."""
    normal = unicodedata.normalize("NFC", text)
    # Shorter texts come back whole (Truncator counts no more characters than len() does).
    return normal if len(normal) <= MESSAGE_CHARS else Truncator(normal).chars(MESSAGE_CHARS)


def _badge(display_status: str, page: _Page) -> str:
    """templates/tasksapp/_badge.html with stale_apart: the status alone."""
    if (found := page.badges.get(display_status)) is None:
        found = page.badges[display_status] = status_badge(display_status)
    return found


def status_badge(display_status: str) -> str:
    """The status badge of templates/tasksapp/_badge.html, for a row and for a task's card."""
    # As {% translate var context %} does: '%' doubled for the lookup, then restored.
    shown = pgettext("task status", display_status.replace("%", "%%")).replace("%%", "%")
    return (
        f'<span class="badge {escape(slugify(display_status))}" data-status="{escape(display_status)}">'
        f"{escape(shown)}</span>"
    )


def _running_for(since: datetime, page: _Page) -> str:
    """The {% running_for %} tag (tasksapp/templatetags/dashboard.py), with the page's zone and clock."""
    local = since.astimezone(page.zone)
    when = absolute_local(local, zone_abbreviation(local), page.zone_name)
    counted = seconds_text(max(0, int((page.now - since).total_seconds())))
    return (
        f'<span data-since="{escape(since.isoformat())}" title="{escape(page.started % {"when": when})}">'
        f"{counted}</span>"
    )


def _stale_mark(task: Any) -> str:
    flag = stale_flag(task.server, task.stale_failing_since)
    return (
        f' <span class="stale-mark" data-server="{task.server_id}" data-held-by="{escape(task.holder_key)}">'
        f"{flag}</span>"
    )


def stale_flag(server: Any, failing_since: datetime | None) -> SafeString:
    """What a running row says of its server's health (task_list.html#stale-flag): disabled, or
    failing since a time (`failing_since`, for the worker that holds the task), or nothing."""
    name = escape(server.name)
    if not server.enabled:
        title = _("%(server)s is disabled, so nobody asks it about this task: this is what it said last")
        disabled = _("stale · server disabled")
        return mark_safe(f'<span class="stale-flag" title="{title % {"server": name}}">{disabled}</span>')  # noqa: S308 (the name escaped)
    if not failing_since:
        return mark_safe("")
    local = timezone.localtime(failing_since)
    title = _(
        "%(server)s is failing since %(when)s: this is what it said last; the task's page says "
        "when it was last confirmed"
    ) % {"server": name, "when": escape(f"{formatted(local, 'H:i:s')} {zone_abbreviation(local)}")}
    prefix = mark_safe(_("stale since") + " ")  # noqa: S308 (our own words, as the template left them)
    shown = stamped(failing_since, "H:i:s", prefix=prefix)
    return mark_safe(f'<span class="stale-flag" title="{title}">{shown}</span>')  # noqa: S308 (the name and time escaped)
