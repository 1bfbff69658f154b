"""The navigation's count of open questions ({% inbox_badge %} in base.html; the live socket renders
templates/tasksapp/_inbox_badge.html, which calls it too)."""

from typing import Any

from django import template
from django.utils.safestring import SafeString

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


@register.simple_tag(takes_context=True)
def inbox_badge(context: Any) -> SafeString:
    """The badge itself (tasksapp/presenters/inbox.py badge_html), out of band when `oob`."""
    from tasksapp.presenters.inbox import badge_html

    return badge_html(inbox_open_count(context), oob=bool(context.get("oob")))
