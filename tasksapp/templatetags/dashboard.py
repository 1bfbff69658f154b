from datetime import datetime

from django import template

register = template.Library()


@register.filter
def elapsed(start: datetime | None, end: datetime | None) -> str:
    """'4s', '3m 12s', '2h 5m': the same units the live counters use."""
    if start is None or end is None:
        return "—"
    seconds = max(0, int((end - start).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {seconds}s" if minutes else f"{seconds}s"


@register.filter
def ago(moment: datetime | None) -> str:
    """'12s ago', '3m 4s ago', '2h 5m ago': precise where Django's timesince says '0 minutes'."""
    from django.utils import timezone

    if moment is None:
        return "never"
    return f"{elapsed(moment, timezone.now())} ago"
