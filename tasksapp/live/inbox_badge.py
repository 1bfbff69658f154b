"""The navigation's open-question count, kept live on every page (owner: inbox).

Every page's socket also joins the inbox group; a question opened or closed anywhere queues the
item BADGE, and the socket sends the badge re-rendered as an out-of-band swap. One render per
change for all sockets of the process (the count is the same for every role that may view).
"""

from django.template.loader import render_to_string

from tasksapp import events
from tasksapp.live import shared

BADGE = ("inbox-badge", 0)
GROUP = events.INBOX


def is_badge_event(event: dict[str, object]) -> bool:
    return event.get("group") == GROUP


async def fragment(not_before: float) -> tuple[str, str]:
    html: str = await shared.render(BADGE, not_before, _render)
    return ("inbox-badge", html)


def _render() -> str:
    from tasksapp.presenters.inbox import open_count

    return render_to_string("tasksapp/_inbox_badge.html", {"inbox_count": open_count(), "oob": True})
