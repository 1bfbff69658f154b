"""A task's card (its status, message, times, lifecycle bar and warnings) as HTML, for its page
(task_detail.html#task-card, through the {% task_card %} tag) and its live updates (tasksapp/live/
pages.py, once per change, language and zone for every role): one builder, so the card sent live
is byte for byte the card a reload shows.

Written here rather than in the template because it is a busy task's most frequent render: every
change re-renders it, and the template engine spent about 0.5 ms on it. The markup is what the
template wrote. What a server, an agent or a person chose (tool, message, names, errors) is escaped
(html.escape, what django.utils.html.escape calls); the dashboard's own words and times are not, as
the template engine treats them. The actions (`task-actions`) depend on the reader's role and stay
in the template: the card leaves a slot for them.
"""

from html import escape
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from tasksapp.presenters.task_rows import status_badge
from tasksapp.presenters.times import (
    elapsed,
    expiry_note,
    running_for,
    seconds_text,
    stamp,
    stamped,
    ttl_left,
)


def card_html(task: Any, life: Any, *, oob: bool, actions: str) -> SafeString:
    """The card of `task` with `life` (tasksapp.lifecycle.of_task) as its bar and `actions` (HTML)
    in place of the role's buttons; `oob`: marked for htmx's out-of-band swap."""
    title = _("Task #%(pk)s · %(tool)s") % {"pk": task.pk, "tool": escape(task.tool_name)}
    no_message = escape(_("no status message"))
    parts = [
        f'\n<div class="card task-head" id="task-card" {'hx-swap-oob="true"' if oob else ""}>\n',
        f"  <h1>{title} ",
        f"{badge(task)}</h1>\n",
        '  <p class="status-message">',
        escape(task.status_message) if task.status_message else f'<span class="muted">{no_message}</span>',
        "</p>\n",
        '  <ul class="meta" id="task-meta">\n',
        _meta(task),
        "  </ul>\n",
        _lifecycle(life),
        f"  {_stale(task)}\n",
        f"  {_cancel_requested(task)}\n",
        f"  {_expired_or_error(task)}\n",
        f"  {actions}\n",
        "</div>\n",
    ]
    return mark_safe("".join(parts))  # noqa: S308 (each part escapes what it was given)


def badge(task: Any) -> str:
    """tasksapp/_badge.html: the status badge and, for a stale task, its flag."""
    shown = status_badge(task.display_status)
    since = task.stale_since
    if not since:
        return shown
    server = escape(task.server.name)
    if task.server.enabled:
        failing = task.stale_failing_since
        if failing:
            when = date_format(timezone.localtime(failing), "H:i:s T")
            title = _("%(server)s is failing since %(when)s: this is what it said last") % {
                "server": server,
                "when": escape(when),
            }
        else:
            title = _("%(server)s is failing: this is what it said last") % {"server": server}
    else:
        title = _("%(server)s is disabled: this is what it said last") % {"server": server}
    flag = stamped(since, "H:i:s", prefix=escape(_("stale since")) + " ")
    iso = escape(date_format(timezone.localtime(since), "c"))
    return f'{shown} <span class="stale-flag" data-stale-since="{iso}" title="{title}">{flag}</span>'


def _meta(task: Any) -> str:
    url = reverse("tasks:server-tools", args=[task.server_id])
    on = _('on <a href="%(server_url)s">%(server)s</a>') % {
        "server_url": escape(url),
        "server": escape(task.server.name),
    }
    started = _("started %(when)s") % {"when": stamp(task.created_at)}
    if task.agent_id:
        started += " " + _("by agent %(who)s, through the gateway") % {"who": escape(task.agent.name)}
    elif task.started_by:
        started += " " + pgettext("started by", "by %(who)s") % {"who": escape(str(task.started_by))}
    lines = [f"    <li>{on}</li>\n", f"    <li>{started}</li>\n"]
    if task.ended_at:
        ran = _("ran for %(elapsed)s") % {"elapsed": escape(elapsed(task.created_at, task.ended_at))}
        lines.append(f"    <li>{ran}</li>\n")
    else:
        words = escape(_("running for"))
        lines.append(f"    <li>{words} {running_for(task.created_at)}</li>\n")
    if task.last_seen_at:
        changed = stamped(
            task.last_seen_at, "H:i:s", id="last-changed", prefix=escape(_("last changed")) + " "
        )
        via = _("by %(via)s") % {"via": escape(pgettext("seen via", task.last_seen_via))}
        lines.append(f"    <li>{changed} ({via})</li>\n")
    else:
        lines.append("    \n")
    if task.last_confirmed_at:
        confirmed = stamped(
            task.last_confirmed_at, "H:i:s", id="last-confirmed", prefix=escape(_("last confirmed")) + " "
        )
        lines.append(f"    <li>{confirmed}</li>\n")
    else:
        lines.append("    \n")
    if task.ttl_deadline and not task.is_terminal and not task.expired:
        lines.append(f"    <li>{ttl_left(task.ttl_deadline)}</li>\n")
    else:
        lines.append("    \n")
    if task.poll_interval_ms:
        asks = _("server asks for a poll every %(ms)s ms") % {"ms": task.poll_interval_ms}
        lines.append(f"    <li>{asks}</li>\n")
    else:
        lines.append("    \n")
    return "".join(lines)


def _lifecycle(life: Any) -> str:
    if not life.segments:
        return "  \n"
    working, waiting, cancel = (
        seconds_text(max(0, int(v or 0))) for v in (life.working, life.waiting_input, life.waiting_cancel)
    )
    label = _("Working %(working)s, waiting for input %(waiting)s, waiting on cancel %(cancel)s") % {
        "working": escape(working),
        "waiting": escape(waiting),
        "cancel": escape(cancel),
    }
    names = {"input": _("waiting for input"), "cancel": _("waiting on cancel")}
    rects = []
    for part in life.segments:
        name = escape(names.get(part.kind, _("working")))
        start, end = timezone.localtime(part.start), timezone.localtime(part.end)
        title = (
            f"{name}: {escape(date_format(start, 'H:i:s'))}\u2013{escape(date_format(end, 'H:i:s T'))}"
            f" ({escape(elapsed(part.start, part.end))})"
        )
        rects.append(
            f'<rect class="{escape(part.kind)}" x="{part.x}" y="0" width="{part.width}" height="18">'
            f"<title>{title}</title></rect>"
        )
    key = "".join(
        f'      <li class="{kind}" data-kind="{kind}"><span>{escape(word)} {escape(seconds)}</span></li>\n'
        for kind, word, seconds in (
            ("working", _("working"), working),
            ("input", _("waiting for input"), waiting),
            ("cancel", _("waiting on cancel"), cancel),
        )
    )
    return (
        "  \n"
        '  <div class="lifecycle" id="task-lifecycle">\n'
        f'    <svg viewBox="0 0 1000 18" preserveAspectRatio="none" role="img" aria-label="{label}">\n'
        f"      {''.join(rects)}\n"
        "    </svg>\n"
        '    <ul class="lifecycle-key">\n'
        f"{key}"
        "    </ul>\n"
        "  </div>\n"
    )


def _stale(task: Any) -> str:
    since = task.stale_since
    if not since:
        return ""
    server = escape(task.server.name)
    stale = escape(_("Stale:"))
    text = f'<p class="warning" id="stale-warning">{stale} '
    if task.server.enabled:
        text += _("%(server)s has been failing") % {"server": server}
        failing = task.stale_failing_since
        if failing:
            text += " " + _("since %(when)s") % {"when": stamp(failing, "H:i:s")}
            if task.leased_by:
                text += " " + _("for worker %(worker)s, which holds this task") % {
                    "worker": escape(task.leased_by)
                }
        if task.stale_error:
            text += f" ({escape(Truncator(task.stale_error).chars(160))})"
        text += _(
            ", so this is what it said last, not confirmed since %(when)s. The worker keeps trying."
        ) % {"when": stamp(since)}
    else:
        text += _(
            "%(server)s is disabled, so nobody asks it about this task; this is what it said last, "
            "at %(when)s."
        ) % {"server": server, "when": stamp(since)}
    return text + "</p>"


def _cancel_requested(task: Any) -> str:
    if not task.cancel_requested_at or task.is_terminal:
        return ""
    text = _("Cancel requested at %(when)s; waiting for the server to confirm.") % {
        "when": stamp(task.cancel_requested_at, "H:i:s")
    }
    return f'<p class="warning">{text}</p>'


def _expired_or_error(task: Any) -> str:
    if task.expired:
        expired, kept = escape(_("Expired:")), escape(_("The last known state and history are kept."))
        return (
            f'<p class="warning" id="expiry-note">{expired} {expiry_note(task)} {kept} '
            f'<span class="small muted">({escape(task.last_error)})</span></p>\n  '
        )
    if task.last_error:
        text = _("Last problem: %(error)s") % {"error": escape(task.last_error)}
        return f'<p class="warning small">{text}</p>'
    return ""
