"""Notifications tied to the request being answered (progress, log messages), PROTOCOL.md §3.5.

A handler calls `emit()`; the app answers that request over SSE, with the notifications
before the response. Outside a request (a task running on its own) `emit()` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from .protocol import JsonObject, notification

Sink = Callable[[JsonObject], None]

_sink: ContextVar[Sink | None] = ContextVar("demoserver_request_stream", default=None)


def bind(sink: Sink) -> None:
    """Route this task's notifications to `sink` (call at the top of the request's own task)."""
    _sink.set(sink)


def emit(method: str, params: JsonObject) -> None:
    sink = _sink.get()
    if sink is not None:
        sink(notification(method, params))
