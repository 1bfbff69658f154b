"""The only code that knows channel-layer group names. Publishes ids of what changed, after commit.

Every message carries its publisher (`src`, one per process) and a number counting up per
publisher and group (`seq`): a process's live hub that sees a number skipped knows a message was
dropped on the way (a full channel drops silently) and has its pages catch up instead of showing
an old state (tasksapp/live/hub.py).

Nothing that writes the mirror waits for the channel layer: a change is numbered and handed to one
publisher thread per process, which sends in number order on its own event loop, so a Redis that
is slow or away (connect timeouts, a stalled socket) delays only the notifications, never the
database thread the worker and the Daphne views share. What it could not send while Redis was
away is counted in the process's few lines about the outage (tasksapp/redislayer.py). A publisher
whose queue is full (Redis away for long) drops the newest message; the number it took stays
skipped, so the pages see the gap and catch up. The in-memory layer (one process, no network) is
still sent to at once: it cannot stall, and its queues belong to the event loop that reads them.
"""

import asyncio
import hashlib
import logging
import queue
import secrets
import threading
import time
from collections import defaultdict
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from tasksapp import redislayer

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


PUBLISH_QUEUE_MAX = 10_000  # messages waiting for the channel layer before the newest are dropped
LOG_EVERY_SECONDS = 60.0


def _send(groups: list[str], message: dict[str, object]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in groups:
        # Numbered under one lock (no I/O under it), so a group's messages leave in number order.
        with _sequence_lock:
            _sequence[group] += 1
            numbered = {**message, "group": group, "src": SOURCE, "seq": _sequence[group]}
            if not isinstance(layer, InMemoryChannelLayer):
                _publisher.put(layer, group, numbered)
                continue
        try:
            async_to_sync(layer.group_send)(group, numbered)
        except Exception:  # a broken channel layer must never undo or break a committed change
            log.exception("could not publish %s to %s", message.get("type"), group)


class _Publisher:
    """One daemon thread with its own event loop that sends what `_send` queued, in order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Any, str, dict[str, object]]] = queue.Queue(PUBLISH_QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.dropped = 0
        self._logged_at = float("-inf")

    def put(self, layer: Any, group: str, message: dict[str, object]) -> None:
        self._ensure_thread()
        try:
            self._queue.put_nowait((layer, group, message))
        except queue.Full:
            self.dropped += 1
            now = time.monotonic()
            if now - self._logged_at >= LOG_EVERY_SECONDS:
                self._logged_at = now
                log.warning(
                    "live: %d message(s) waiting for the channel layer; dropping new ones (%d so far, "
                    "the pages catch up)",
                    PUBLISH_QUEUE_MAX,
                    self.dropped,
                )

    def pending(self) -> int:
        return self._queue.unfinished_tasks

    def wait_sent(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="channel-layer-publisher", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            layer, group, message = self._queue.get()
            try:
                loop.run_until_complete(self._send_one(layer, group, message))
            finally:
                self._queue.task_done()

    async def _send_one(self, layer: Any, group: str, message: dict[str, object]) -> None:
        try:
            await layer.group_send(group, message)
        except redislayer.UNREACHABLE as exc:  # Redis away: a few lines per outage, not one a message
            redislayer.reachability.failed("notification(s) not sent", exc)
        except Exception:  # a broken channel layer must never stop the publisher
            log.exception("live: could not publish %s to %s", message.get("type"), group)
        else:
            redislayer.reachability.worked()


_publisher = _Publisher()


def publish_pending() -> int:
    """Messages queued for the channel layer and not yet sent (or being sent)."""
    return _publisher.pending()


def wait_sent(timeout: float = 10.0) -> bool:
    """Wait until every message queued so far has been sent (or failed); False on timeout."""
    return _publisher.wait_sent(timeout)
