"""The worker's notification thread: scan, then send what is due, every few seconds.

A thread of its own, so a slow SMTP server or webhook never holds up polling; everything it needs
to continue is in the database (the cursor and the outbox), so a restart loses nothing.
"""

import logging
import threading

from django.db import close_old_connections

from tasksapp.notify.scan import scan
from tasksapp.notify.send import drain_once

log = logging.getLogger(__name__)
INTERVAL_SECONDS = 2.0


def step() -> int:
    scan()
    return drain_once()


def _loop(stop: threading.Event, interval: float) -> None:
    while not stop.is_set():
        try:
            close_old_connections()
            step()
        except Exception:  # the thread's loop boundary: log, keep going
            log.exception("notify: a scan or send round failed")
        stop.wait(interval)
    close_old_connections()


def start(interval: float = INTERVAL_SECONDS) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=_loop, args=(stop, interval), name="notify-drainer", daemon=True)
    thread.start()
    return thread, stop
