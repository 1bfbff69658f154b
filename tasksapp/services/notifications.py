"""A person's notification settings (which events, servers and tools, and where to send them)."""

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from tasksapp.models import NotificationPreference
from tasksapp.services.audit import audit

MAX_TOOLS = 100


def notification_preference_get(*, user_id: int) -> NotificationPreference:
    """The person's settings; a first look saves the empty ones (no events chosen: nothing is sent)."""
    pref, _created = NotificationPreference.objects.get_or_create(user_id=user_id)
    return pref


def notification_preference_set(
    *,
    pref: NotificationPreference,
    events: Iterable[str],
    server_ids: Iterable[int],
    tools: Iterable[str],
    email: str,
    webhook_url: str,
    webhook_secret: str,
    browser: bool,
    user: Any,
) -> NotificationPreference:
    """Save a person's choices and audit them ("notify_settings", secrets left out).

    Tools are stripped, kept once each and sorted (at most MAX_TOOLS); empty webhook_secret keeps
    the stored one. No server_ids or no tools mean all of them."""
    pref.events = list(events)
    pref.server_ids = sorted(server_ids)
    pref.tools = sorted({tool.strip() for tool in tools if tool.strip()})[:MAX_TOOLS]
    pref.email = email
    pref.webhook_url = webhook_url
    if webhook_secret:
        pref.webhook_secret = webhook_secret
    pref.browser = browser
    with transaction.atomic():
        pref.save()
        detail = {"events": pref.events, "email": bool(pref.email), "webhook": bool(pref.webhook_url)}
        audit(user, "notify_settings", detail=detail)
    return pref
