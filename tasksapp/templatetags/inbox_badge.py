"""The navigation's count of open questions (templates/tasksapp/_inbox_badge.html)."""

from typing import Any

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def inbox_open_count(context: Any) -> int:
    """One COUNT per page for a signed-in user; pushed fragments pass `inbox_count` instead."""
    if "inbox_count" in context:
        return int(context["inbox_count"])
    user = context.get("user")
    if user is None or not user.is_authenticated:
        return 0
    from tasksapp.presenters.inbox import open_count

    return open_count()
