"""Notification email with an overall deadline.

Django's SMTP backend bounds each socket operation at most (EMAIL_TIMEOUT, unset by default: not
even that), so a mail server that answers a byte at a time holds the sending thread for ever.
Here every delivery through the SMTP backend also has a deadline for the whole exchange,
NOTIFY_DEADLINE_SECONDS: a watchdog shuts the socket down when it passes, which ends whatever
read or write is waiting. Other backends (console, file, locmem in tests) are used as configured.
"""

import functools
import smtplib
import socket
import ssl
import threading
import warnings
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.backends import smtp

from tasksapp.notify import config

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
Watch = Callable[[smtplib.SMTP, socket.socket], None]


def send_email(*, subject: str, text: str, to: str) -> None:
    """Send one message; raises on any failure, TimeoutError when the deadline passed."""
    message = EmailMessage(subject, text, config.sender(), [to])
    if settings.EMAIL_BACKEND != SMTP_BACKEND:
        message.send()
        return
    with warnings.catch_warnings():
        # Django 6.1 prefers MAILERS to building a backend; the settings still use EMAIL_*.
        warnings.filterwarnings("ignore", message="Directly creating EmailBackend instances is deprecated")
        backend = DeadlineSmtpBackend(deadline=float(settings.NOTIFY_DEADLINE_SECONDS))
    backend.send_messages([message])


class DeadlineSmtpBackend(smtp.EmailBackend):
    """Django's SMTP backend, each send_messages() call bounded by `deadline` seconds overall (and
    each socket operation by EMAIL_TIMEOUT, else config.TIMEOUT_SECONDS)."""

    def __init__(self, *, deadline: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout = self.timeout if self.timeout is not None else config.TIMEOUT_SECONDS
        self.deadline = deadline
        self._watched: tuple[smtplib.SMTP, socket.socket] | None = None
        self._expired = threading.Event()

    @property
    def connection_class(self) -> Any:
        watched = _WatchedSMTPSSL if self.use_ssl else _WatchedSMTP
        return functools.partial(watched, watch=self._watch)

    def send_messages(self, email_messages: Any) -> int:
        timer = threading.Timer(self.deadline, self._cut)
        timer.daemon = True
        timer.start()
        try:
            return int(super().send_messages(email_messages) or 0)
        except (OSError, smtplib.SMTPException) as exc:
            if self._expired.is_set():
                raise TimeoutError(f"no complete SMTP exchange within {self.deadline:g} s") from exc
            raise
        finally:
            timer.cancel()
            if self._expired.is_set():
                self.connection = self._partial_connection = None  # the socket is gone: nothing to QUIT

    def _watch(self, connection: smtplib.SMTP, sock: socket.socket) -> None:
        self._watched = (connection, sock)

    def _cut(self) -> None:
        self._expired.set()
        if self._watched is None:
            return
        connection, raw = self._watched
        current = getattr(connection, "sock", None) or raw  # STARTTLS replaced the socket
        with suppress(OSError):
            current.shutdown(socket.SHUT_RDWR)


class _WatchedSMTP(smtplib.SMTP):
    """smtplib.SMTP that hands its socket over as soon as it is connected (before the greeting)."""

    def __init__(self, *args: Any, watch: Watch, **kwargs: Any) -> None:
        self._watch_socket = watch
        super().__init__(*args, **kwargs)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, timeout)  # type: ignore[misc]
        self._watch_socket(self, sock)
        return sock  # type: ignore[no-any-return]


class _WatchedSMTPSSL(smtplib.SMTP_SSL):
    def __init__(self, *args: Any, watch: Watch, **kwargs: Any) -> None:
        self._watch_socket = watch
        super().__init__(*args, **kwargs)

    def _get_socket(self, host: str, port: int, timeout: float) -> ssl.SSLSocket:
        sock = super()._get_socket(host, port, timeout)  # type: ignore[misc]
        self._watch_socket(self, sock)
        return sock  # type: ignore[no-any-return]
