"""Security notices for the people who manage servers: queued in the outbox for every admin, on
every channel they have set up on their notification settings (email, webhook, browser),
whatever events they chose there, in each admin's language. Values a server chose are made
harmless per channel (tasksapp/notify/text.py). Nothing here talks to the network: the drainer
sends the rows (tasksapp/notify/send.py). The server page and the audit log say the same to
everyone."""

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import translation
from django.utils.functional import Promise

from tasksapp.models import NotificationOutbox, NotificationPreference, UserPreference
from tasksapp.notify.config import base_url
from tasksapp.notify.text import values_for
from tasksapp.permissions import MANAGE_SERVERS, can

EVENT = "security"


def notify_admins(*, key: str, subject: Promise, text: Promise, values: dict[str, Any], path: str) -> int:
    """Queue one notice per admin and channel (a `key` already queued is not queued again);
    returns how many rows were offered. Safe inside the caller's transaction."""
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(
            Q(is_superuser=True)
            | Q(groups__permissions__codename="change_mcpserver")
            | Q(user_permissions__codename="change_mcpserver")
        )
    )
    admins = [user for user in users.distinct() if can(user, MANAGE_SERVERS)]
    chosen = UserPreference.objects.filter(user__in=admins)
    languages = dict(chosen.values_list("user_id", "language"))
    rows = []
    for pref in NotificationPreference.objects.filter(user__in=admins).select_related("user"):
        with translation.override(languages.get(pref.user_id) or settings.LANGUAGE_CODE):
            for channel in _channels(pref):
                shown = values_for(channel, values)
                rows.append(
                    NotificationOutbox(
                        user=pref.user,
                        channel=channel,
                        key=key,
                        event=EVENT,
                        subject=str(subject % shown)[:300],
                        text=f"{text % shown}\n{base_url()}{path}",
                    )
                )
    NotificationOutbox.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _channels(pref: NotificationPreference) -> list[str]:
    wanted = (("email", pref.email), ("webhook", pref.webhook_url), ("browser", pref.browser))
    return [name for name, on in wanted if on]
