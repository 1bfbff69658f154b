"""From what happened to outbox rows: one per user, channel and event, as each user chose."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

from tasksapp.models import (
    InputRequest,
    McpServer,
    NotificationOutbox,
    NotificationPreference,
    NotifyCursor,
    TaskEvent,
    UserPreference,
)
from tasksapp.notify.config import base_url
from tasksapp.notify.text import values_for
from tasksapp.permissions import VIEW, can

MARGIN = timedelta(seconds=5)  # rows committed a little late still fall in the next window
LOOK_BACK = timedelta(minutes=10)  # the longest a stopped worker catches up on
UNHEALTHY_FAILURES = 3  # consecutive failed polls before a server counts as unhealthy
Message = tuple[Promise, dict[str, Any]]  # gettext_lazy text and its values: put in each reader's language
Event = tuple[str, str, int | None, str | None, Message, str]  # (event, key, server id, tool, message, path)
INPUT = _("Input needed: task #%(task)s (%(tool)s) on %(server)s asks a question.")
FAILED = _("Task #%(task)s (%(tool)s) on %(server)s failed.")
UNHEALTHY = _("Server %(server)s is unhealthy: %(failures)s failed polls in a row. %(error)s")
MORE_INPUT = ngettext_lazy(
    "Task #%(task)s (%(tool)s) on %(server)s asked %(count)s questions in %(minutes)s minute; you were "
    "told of the first. %(open)s of them are still open.",
    "Task #%(task)s (%(tool)s) on %(server)s asked %(count)s questions in %(minutes)s minutes; you were "
    "told of the first. %(open)s of them are still open.",
    "minutes",
)
INPUT_FIELDS = ("task_id", "task__server_id", "task__server__name", "task__tool_name")


def happenings(since: datetime, until: datetime, reported: set[int]) -> tuple[list[Event], set[int]]:
    """Events in (since, until], and the servers unhealthy now (those in `reported` were told)."""
    found: list[Event] = [*_asked(since, until), *_input_digests(since, until)]
    failed = TaskEvent.objects.filter(observed_at__gt=since, observed_at__lte=until, status="failed")
    for task_id, server_id, server, tool in failed.values_list(
        "task_id", "task__server_id", "task__server__name", "task__tool_name"
    ).distinct()[:500]:
        text = (FAILED, {"task": task_id, "tool": tool, "server": server})
        path = reverse("tasks:detail", args=[task_id])
        found.append(("failed", f"failed-{task_id}", server_id, tool, text, path))
    unhealthy = McpServer.objects.filter(consecutive_failures__gte=UNHEALTHY_FAILURES, archived=False)
    now_bad = set()
    for pk, name, failures, error in unhealthy.values_list(
        "pk", "name", "consecutive_failures", "last_error"
    ):
        now_bad.add(pk)
        if pk not in reported:
            text = (UNHEALTHY, {"server": name, "failures": failures, "error": str(error)[:300]})
            key, path = f"unhealthy-{pk}-{until:%Y%m%d%H%M%S}", reverse("tasks:server-tools", args=[pk])
            found.append(("unhealthy", key, pk, None, text, path))
    return found, now_bad


def _windows(since: datetime, until: datetime) -> Iterator[tuple[int, datetime, datetime]]:
    """(number, start, end) for each part of (since, until] that lies in one task window. Window n
    is (n * W, (n + 1) * W] in seconds since the epoch, W being NOTIFY_TASK_WINDOW_SECONDS."""
    width = settings.NOTIFY_TASK_WINDOW_SECONDS
    number = int(since.timestamp() // width)  # the window of the instants just after `since`
    start = since
    while start < until:
        end = min(until, datetime.fromtimestamp((number + 1) * width, UTC))
        yield number, start, end
        number, start = number + 1, end


def _asked(since: datetime, until: datetime) -> list[Event]:
    """One "input needed" per task per window: for the first open question seen in it."""
    found: list[Event] = []
    for number, start, end in _windows(since, until):
        asked = InputRequest.objects.filter(first_seen_at__gt=start, first_seen_at__lte=end, state="open")
        for task_id, server_id, server, tool in asked.order_by().values_list(*INPUT_FIELDS).distinct()[:500]:
            text = (INPUT, {"task": task_id, "tool": tool, "server": server})
            found.append(
                ("input", f"input-{task_id}-{number}", server_id, tool, text, reverse("tasks:inbox"))
            )
    return found


def _input_digests(since: datetime, until: datetime) -> list[Event]:
    """For each task window that ended in (since, until] and held more questions than the one that
    was told: one message saying how many it held and how many are still open."""
    width = settings.NOTIFY_TASK_WINDOW_SECONDS
    found: list[Event] = []
    for number, _start, end in _windows(since, until):
        if end.timestamp() != (number + 1) * width:
            continue  # this window has not ended yet
        held = InputRequest.objects.filter(
            first_seen_at__gt=datetime.fromtimestamp(number * width, UTC), first_seen_at__lte=end
        )
        counts = held.values(*INPUT_FIELDS).annotate(n=Count("pk"), open=Count("pk", filter=Q(state="open")))
        many = {row["task_id"]: row for row in counts.order_by().filter(n__gt=1)[:500]}
        told = NotificationOutbox.objects.filter(key__in=[f"input-{task}-{number}" for task in many])
        for key in set(told.values_list("key", flat=True)):
            found.append(_digest(key, many[int(key.split("-")[1])], width))
    return found


def _digest(key: str, row: dict[str, Any], width: int) -> Event:
    task, tool = row["task_id"], row["task__tool_name"]
    values = {"task": task, "tool": tool, "server": row["task__server__name"], "minutes": width // 60}
    values.update(count=row["n"], open=row["open"])
    path = reverse("tasks:detail", args=[task])
    return ("input", f"{key}-more", row["task__server_id"], tool, (MORE_INPUT, values), path)


def enqueue(found: list[Event]) -> int:
    """Outbox rows for every user who wants each event (and may see tasks); rows already queued
    for the same user, channel and event are ignored. Returns the rows offered, not those new."""
    prefs = [pref for pref in NotificationPreference.objects.select_related("user") if can(pref.user, VIEW)]
    chosen = UserPreference.objects.filter(user_id__in=[pref.user_id for pref in prefs])
    languages = dict(chosen.values_list("user_id", "language"))  # empty: LANGUAGE_CODE
    rows = []
    for event, key, server_id, tool, (message, values), path in found:
        for pref in prefs:
            if not pref.wants(event, server_id, tool):
                continue
            wanted = (("email", pref.email), ("webhook", pref.webhook_url), ("browser", pref.browser))
            link = base_url() + path
            with translation.override(languages.get(pref.user_id) or settings.LANGUAGE_CODE):
                for channel in [name for name, on in wanted if on]:
                    text = str(message % values_for(channel, values))
                    rows.append(
                        NotificationOutbox(
                            user=pref.user,
                            channel=channel,
                            key=key,
                            event=event,
                            subject=text[:300],
                            text=f"{text}\n{link}",
                        )
                    )
    NotificationOutbox.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def scan(now: datetime | None = None) -> int:
    """Move the cursor to now, enqueueing what happened since it (one worker at a time)."""
    now = now or timezone.now()
    if not NotificationPreference.objects.exists():  # nobody listens: no writes, no locks
        return 0
    with transaction.atomic():
        cursor = NotifyCursor.objects.select_for_update().filter(pk=1).first()
        if cursor is None:
            cursor = NotifyCursor.objects.create(pk=1, scanned_to=now - MARGIN)
        reported: Any = set(cursor.unhealthy or [])
        since = max(cursor.scanned_to, now - LOOK_BACK) - MARGIN
        found, now_bad = happenings(since, now, reported)
        queued = enqueue(found)
        NotifyCursor.objects.filter(pk=1).update(scanned_to=now, unhealthy=sorted(now_bad))
    return queued
