"""The only code that knows channel-layer group names. Publishes ids of what changed, after commit.

Every message carries its publisher (`src`, one per process) and a number counting up per
publisher and group (`seq`): a process's live hub that sees a number skipped knows a message was
dropped on the way (a full channel drops silently) and has its pages catch up instead of showing
an old state (tasksapp/live/hub.py).
"""

import hashlib
import logging
import secrets
import threading
from collections import defaultdict
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

log = logging.getLogger(__name__)

TASKS = "tasks"  # every task change: lists, overview tiles
INBOX = "inbox"  # input requests opened or closed
SERVERS = "servers"  # server health and discovery
WORKERS = "workers"  # nudges for workers: poll a task soon, re-listen

SOURCE = secrets.token_hex(6)
_sequence: defaultdict[str, int] = defaultdict(int)
_sequence_lock = threading.Lock()


def session_group(session_key: str) -> str:
    """The sockets opened with one login session (the key itself never leaves the process)."""
    return "session-" + hashlib.sha256(session_key.encode()).hexdigest()[:32]


def user_group(user_id: Any) -> str:
    return f"user-{user_id}"


def publish_task_changed(task_id: int, *, inbox: bool = False) -> None:
    """After the current transaction commits, tell every page showing this task to re-read it."""
    message = {"type": "task.changed", "id": task_id}
    # A task's own page listens to TASKS too, and keeps its task's changes (tasksapp/live/pages.py).
    groups = [*([INBOX] if inbox else []), TASKS]
    transaction.on_commit(lambda: _send(groups, message))


def publish_server_changed(server_id: int) -> None:
    transaction.on_commit(lambda: _send([SERVERS], {"type": "server.changed", "id": server_id}))


def nudge_workers(task_id: int) -> None:
    """Ask whichever worker holds this task to poll it now (after an answer or a cancel)."""
    transaction.on_commit(lambda: _send([WORKERS], {"type": "task.nudge", "id": task_id}))


def notify_user(user_id: Any, *, key: str, text: str, url: str) -> None:
    """A browser notification for every open page of one user (tasksapp/notify/send.py)."""
    _send([user_group(user_id)], {"type": "notify.browser", "key": key, "text": text, "url": url})


def end_sessions(groups: list[str]) -> None:
    """Close every socket in these session or user groups: the page says "you were signed out"."""
    _send(groups, {"type": "session.ended"})


@receiver(user_logged_out, dispatch_uid="tasksapp.events.logged_out")
def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        end_sessions([session_group(key)])


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="tasksapp.events.deactivated")
def _deactivated(sender: Any, instance: Any, **kwargs: Any) -> None:
    if not instance.is_active:
        transaction.on_commit(lambda: end_sessions([user_group(instance.pk)]))


def _send(groups: list[str], message: dict[str, object]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in groups:
        try:
            # Numbered and sent under one lock, so a group's messages leave in number order.
            with _sequence_lock:
                _sequence[group] += 1
                numbered = {**message, "group": group, "src": SOURCE, "seq": _sequence[group]}
                async_to_sync(layer.group_send)(group, numbered)
        except Exception:  # a broken channel layer must never undo or break a committed change
            log.exception("could not publish %s to %s", message.get("type"), group)
