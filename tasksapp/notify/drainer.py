"""The worker's notification thread (and the demo's notifier): scan, then send what is due, every
few seconds.

A thread of its own, so a slow SMTP server or webhook never holds up polling; everything it needs
to continue is in the database (the cursor and the outbox), so a restart loses nothing.
"""

import asyncio
import logging
import threading

from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import close_old_connections

from tasksapp.lib.connections import database_sync_to_async
from tasksapp.notify.config import CHANNELS
from tasksapp.notify.scan import scan
from tasksapp.notify.send import drain_once

log = logging.getLogger(__name__)
INTERVAL_SECONDS = 2.0
REMOTE_CHANNELS = tuple(channel for channel in CHANNELS if channel != "browser")


def step(channels: tuple[str, ...] = CHANNELS) -> int:
    scan()
    return drain_once(channels=channels)


def reachable_channels() -> tuple[str, ...]:
    """Every channel, but browser notifications only when this process's channel layer reaches the
    web processes (Redis): an in-memory layer reaches no page outside this process, so those rows
    are left to the process that serves the pages (`manage.py demo`'s browser notifier)."""
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        return tuple(channel for channel in CHANNELS if channel != "browser")
    return CHANNELS


def _loop(stop: threading.Event, interval: float) -> None:
    channels = reachable_channels()
    while not stop.is_set():
        try:
            close_old_connections()
            step(channels)
        except Exception:  # the thread's loop boundary: log, keep going
            log.exception("notify: a scan or send round failed")
        stop.wait(interval)
    close_old_connections()


def start(interval: float = INTERVAL_SECONDS) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=_loop, args=(stop, interval), name="notify-drainer", daemon=True)
    thread.start()
    return thread, stop


async def demo_notifier(interval: float = INTERVAL_SECONDS) -> None:
    """`manage.py demo`: an asyncio task on the demo's loop. It scans and shows browser notifications
    on the process's database thread (no network I/O there), then sends email and webhooks on a
    thread of its own, so a slow SMTP server or webhook never holds up a page. Cancelled first
    when the demo stops; a send already under way ends within its own deadline."""
    while True:
        try:
            await database_sync_to_async(step)(("browser",))
            await sync_to_async(_send_remote, thread_sensitive=False)()
        except Exception:  # the loop boundary: log, keep going
            log.exception("notify: a notification round failed")
        await asyncio.sleep(interval)


def _send_remote() -> None:
    try:
        drain_once(channels=REMOTE_CHANNELS)
    finally:
        close_old_connections()
