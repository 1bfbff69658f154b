"""Logging filters the settings install (dashboard/settings.py LOGGING)."""

import logging
import threading
import time

from tasksapp import redislayer


class RefusalsOnOneLine(logging.Filter):
    """django.request logs an expected refusal (a 4xx: no permission, not found, a bad request) with
    the exception's whole traceback; its one line already says all there is (status, path). Server
    errors (5xx) keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


class RetriedOnOneLine(logging.Filter):
    """A page load whose database connection died under it is answered again on a new connection
    (tasksapp.middleware.RetryLostConnectionMiddleware): the first attempt's 500 is not the
    answer, so it is one WARNING line, not an ERROR with a traceback. If the last attempt
    (connections.PAGE_ATTEMPTS) fails too, that one is logged as usual."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        method = str(getattr(request, "method", ""))
        if getattr(request, "_connection_lost", False) and method in ("GET", "HEAD"):
            reason = record.exc_info[1] if record.exc_info else None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "database connection lost during %s %s (%s); answering again on a new connection"
            record.args = (method, getattr(request, "path", ""), str(reason).strip() or "closed")
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


class OncePerSecond(logging.Filter):
    """At most one line a second from a logger (psycopg.pool's reconnecting threads each log every
    failed attempt: 3-10 a second during an outage); the next line that passes says how many were
    left out."""

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        self._last = 0.0
        self._skipped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._last < 1.0:
                self._skipped += 1
                return False
            self._last, skipped, self._skipped = now, self._skipped, 0
        if skipped:
            record.msg = f"{record.getMessage()} ({skipped} more like it in the last second)"
            record.args = ()
        return True


class LayerFailuresCounted(logging.Filter):
    """Daphne logs an application that failed with its traceback ("Exception inside
    application"). A websocket that ended because Redis is unreachable is counted in the
    process's few lines about the outage instead (tasksapp/redislayer.py), and one whose process
    lost its hub's subscription is left out (the hub has logged why). Any other failure keeps its
    line and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Imported here: this module is loaded with the settings, before the apps.
        from tasksapp.live.hub import HubLost

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, redislayer.UNREACHABLE):
            redislayer.reachability.failed("socket(s) closed or refused", exc)
            return False
        return not isinstance(exc, HubLost)


EXECUTOR_QUIT = "CurrentThreadExecutor already quit or is broken"  # asgiref's RuntimeError, exactly


class ClientLeftOnOneLine(logging.Filter):
    """A request whose client left while a view still ran (Daphne cancels it) can end with
    asgiref's RuntimeError "CurrentThreadExecutor already quit or is broken", raised out of
    Django's request handler when it sends request_finished: the request's thread had been handed
    back already. Nobody waits for that answer: one INFO line saying so, not an ERROR with a
    traceback. Any other RuntimeError keeps both."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if type(exc) is RuntimeError and str(exc) == EXECUTOR_QUIT:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = (
                "a request ended after its client had left (asgiref: %s); request_finished was not sent"
            )
            record.args = (EXECUTOR_QUIT,)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True
