from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.lib import markdown as markdown_module
from tasksapp.presenters.timeline_rows import entries_html
from tasksapp.presenters.times import absolute, elapsed, seconds_text, stamp, stamped

register = template.Library()
register.filter("elapsed", elapsed)
register.filter("stamp", stamp)
register.simple_tag(stamped, name="stamped")
register.simple_tag(entries_html, name="timeline_entries")


@register.filter
def ago(moment: datetime | None) -> SafeString | str:
    """'12s ago', '3m 4s ago', '2h 5m ago' (precise where timesince says '0 minutes'); the absolute
    time, with its zone, on hover."""
    if moment is None:
        return _("never")
    text = _("%(elapsed)s ago") % {"elapsed": elapsed(moment, timezone.now())}
    return format_html('<span class="ago" title="{}">{}</span>', absolute(moment), text)


@register.simple_tag
def running_for(since: datetime) -> SafeString:
    """How long since `since`, counting up in the browser (app.js reads data-since), in the units of
    `elapsed`; the start time, with its zone, on hover."""
    return format_html(
        '<span data-since="{}" title="{}">{}</span>',
        since.isoformat(),
        _("started %(when)s") % {"when": absolute(since)},
        elapsed(since, timezone.now()),
    )


@register.simple_tag
def ttl_left(deadline: datetime) -> SafeString:
    """'TTL 14m 20s left' or 'TTL passed', counting down in the browser (app.js reads data-deadline)."""
    left = int((deadline - timezone.now()).total_seconds())
    text = _("TTL %(time)s left") % {"time": seconds_text(left)} if left > 0 else _("TTL passed")
    return format_html(
        '<span data-deadline="{}" title="{}">{}</span>',
        deadline.isoformat(),
        _("the server may forget this task after %(when)s") % {"when": absolute(deadline)},
        text,
    )


@register.filter
def markdown(text: Any) -> SafeString:
    """A server's markdown (tool descriptions) as sanitised HTML: tasksapp/lib/markdown.py."""
    return markdown_module.render(text)


EXPORTED = {"tasks": gettext_lazy("the task list"), "audit": gettext_lazy("the audit log")}
EXPORT_FORMATS = {"csv": "CSV", "jsonl": "JSON Lines"}


@register.filter
def audit_summary(entry: Any) -> str:
    """An audit entry's one-line detail, in the reader's language where the dashboard wrote it
    (an export: what, as which format, filtered how); otherwise the summary recorded with it."""
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.action != "export":
        return str(detail.get("summary") or "")
    what, fmt = str(detail.get("what", "")), str(detail.get("format", ""))
    text = _("%(what)s as %(format)s") % {
        "what": EXPORTED.get(what, what),
        "format": EXPORT_FORMATS.get(fmt, fmt),
    }
    filters = detail.get("filters")
    shown = ", ".join(f"{key}={value}" for key, value in filters.items()) if isinstance(filters, dict) else ""
    return f"{text} ({shown})" if shown else text


@register.simple_tag
def expiry_note(task: Any) -> SafeString:
    """What happened to an expired task, in words a person can act on: lost before its TTL ran out
    (its server restarted without keeping tasks, most likely), or gone after its TTL."""
    deadline = task.ttl_deadline
    expired_at = task.expired_at or timezone.now()
    if deadline is None:
        text = _(
            "The server no longer knows this task, although it set no TTL: the server was probably "
            "restarted without keeping its tasks."
        )
        return format_html("{}", text)
    if expired_at < deadline:
        text = _(
            "The server no longer knows this task, although its TTL had %(left)s left: the server "
            "was probably restarted without keeping its tasks."
        ) % {"left": elapsed(expired_at, deadline)}
        return format_html("{}", text)
    sentence = conditional_escape(
        _("Its TTL ran out at %(when)s, and a server may delete a task once its TTL has passed.")
    )
    return mark_safe(sentence % {"when": stamp(deadline, "H:i:s")})  # noqa: S308 (escaped, then a <time>)


@register.simple_tag
def now_stamp() -> SafeString | str:
    """The current time in the reader's zone, labelled like every other time."""
    return stamp(timezone.now())


@register.filter
def seconds(value: int | float | None) -> str:
    """A number of seconds as '4s', '3m 12s', '2h 5m'."""
    return seconds_text(max(0, int(value or 0)))
