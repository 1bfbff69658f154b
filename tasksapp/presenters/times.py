"""How pages write times and durations, in the reader's zone: template filters and tags
(tasksapp/templatetags/dashboard.py) and the task list's rows (tasksapp/presenters/task_rows.py)."""

from datetime import datetime
from html import escape
from typing import Any

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

FULL = "Y-m-d H:i:s"
CLOCK = "H:i:s"


def elapsed(start: datetime | None, end: datetime | None) -> str:
    """'4s', '3m 12s', '2h 5m': the same units the live counters use."""
    if start is None or end is None:
        return "—"
    return seconds_text(max(0, int((end - start).total_seconds())))


def seconds_text(seconds: int) -> str:
    """'4s', '3m 12s', '2h 5m', '3d 4h': two units at most. app.js's `duration()` writes the same, so
    a live counter and a page the server rendered never disagree."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s" if minutes else f"{seconds}s"


def absolute(moment: datetime) -> str:
    """'2026-12-01 10:07:03 Asia/Shanghai (CST)': the full time and the zone it is in."""
    local = timezone.localtime(moment)
    return absolute_local(local, zone_abbreviation(local), timezone.get_current_timezone_name())


def absolute_local(local: datetime, abbreviation: str, zone: str) -> str:
    """absolute() of a time already in the reader's zone, named `zone`, abbreviated `abbreviation`."""
    suffix = f" ({abbreviation})" if abbreviation and abbreviation != zone else ""
    return f"{formatted(local, FULL)} {zone}{suffix}"


def zone_abbreviation(local: datetime) -> str:
    """date_format(local, "T") without its formatter (a page formats hundreds of times): the zone's
    abbreviation, "" when the wall time is ambiguous or does not exist (a clock change)."""
    zone = local.tzinfo
    if zone is None or zone.utcoffset(local.replace(fold=not local.fold)) != zone.utcoffset(local):
        return ""
    return str(zone.tzname(local))


def formatted(local: datetime, fmt: str) -> str:
    """Django's date format, plus a trailing ".ms" for milliseconds ("H:i:s.ms" -> 10:07:03.042).
    The two formats nearly every time uses are written directly (the same digits)."""
    if fmt == FULL:
        return (
            f"{local.year:04d}-{local.month:02d}-{local.day:02d} "
            f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
        )
    if fmt == CLOCK:
        return f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    if fmt.endswith(".ms"):
        return f"{formatted(local, fmt[:-3])}.{local.microsecond // 1000:03d}"
    return date_format(local, fmt)


def stamp(moment: datetime | None, fmt: str = FULL) -> SafeString | str:
    """A time that says its zone: `<time title="full time, zone">H:i:s CST</time>` (reader's zone)."""
    if moment is None:
        return "—"
    return stamp_local(timezone.localtime(moment), timezone.get_current_timezone_name(), fmt)


def stamp_local(local: datetime, zone: str, fmt: str = FULL) -> SafeString:
    """stamp() of a time already in the reader's zone, named `zone` (a page of rows reads it once)."""
    abbreviation = zone_abbreviation(local)
    parts = (
        local.isoformat(),
        absolute_local(local, abbreviation, zone),
        formatted(local, fmt),
        abbreviation or zone,
    )
    return mark_safe('<time datetime="{}" title="{}">{} {}</time>'.format(*map(escape, parts)))  # noqa: S308 (each part escaped)


def stamped(moment: datetime | None, fmt: str = FULL, *, id: str = "", prefix: str = "") -> SafeString | str:
    """Like `stamp`, with words before the time and an id on the time itself, inside one <time>:
    `{% stamped since "H:i:s" prefix="stale since " %}` reads "stale since 10:07:03 CST"."""
    if moment is None:
        return "—"
    local = timezone.localtime(moment)
    zone = timezone.get_current_timezone_name()
    abbreviation = zone_abbreviation(local)
    text = formatted(local, fmt)
    shown = format_html('<span id="{}">{}</span>', id, text) if id else text
    return format_html(
        '<time datetime="{}" title="{}">{}{} {}</time>',
        local.isoformat(),
        absolute_local(local, abbreviation, zone),
        prefix,
        shown,
        abbreviation or zone,
    )


def ago(moment: datetime | None) -> SafeString | str:
    """'12s ago', '3m 4s ago', '2h 5m ago' (precise where timesince says '0 minutes'); the absolute
    time, with its zone, on hover (the `ago` filter)."""
    if moment is None:
        return _("never")
    text = _("%(elapsed)s ago") % {"elapsed": elapsed(moment, timezone.now())}
    return format_html('<span class="ago" title="{}">{}</span>', absolute(moment), text)


def running_for(since: datetime) -> SafeString:
    """How long since `since`, counting up in the browser (app.js reads data-since), in the units of
    `elapsed`; the start time, with its zone, on hover."""
    return format_html(
        '<span data-since="{}" title="{}">{}</span>',
        since.isoformat(),
        _("started %(when)s") % {"when": absolute(since)},
        elapsed(since, timezone.now()),
    )


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
