"""Database access that survives a dropped connection (a PostgreSQL restart, pg_terminate_backend).

Django replaces a broken connection only between HTTP requests. The worker and the websocket
consumers make no requests, so their steps go through `resilient`: connections that are stale
(or that failed before) are handed back before the step and after it, and a step whose
connection died under it is run once more on a fresh connection. With the connection pool
(docs/deploy.md) a fresh connection is a checked one from the pool.
"""

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import SyncToAsync
from channels.db import DatabaseSyncToAsync
from django.db import InterfaceError, InternalError, OperationalError, connections

log = logging.getLogger(__name__)
CONNECTION_LOST = (OperationalError, InterfaceError)
# The mirror cannot be written at all: no connection, or a database that refuses writes (read-only
# after a failover, a full disk). Not a fault of the row being written.
CANNOT_WRITE = (*CONNECTION_LOST, InternalError)


def resilient[R](fn: Callable[..., R]) -> Callable[..., R]:
    """`fn` run on a live connection, retried once if the connection was lost while it ran.

    Only for steps that are safe to repeat: every service the worker and consumers call is
    (writes are idempotent, reads have no effect). Inside a transaction nothing is retried:
    the transaction is the caller's to repeat.
    """

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> R:
        refresh_connections()
        try:
            return fn(*args, **kwargs)
        except CONNECTION_LOST as exc:
            if in_transaction():
                raise
            log.warning("database connection lost in %s (%s); retrying on a new connection", _name(fn), exc)
            drop_connections()
            return fn(*args, **kwargs)
        finally:
            if not in_transaction():
                refresh_connections()

    return step


def refresh_connections() -> None:
    """Close what is broken or past its age; pooled connections go back to their pool.

    An SQLite connection that has not failed is kept: a file does not drop connections, and the
    worker takes many small steps (closing each time would reopen the file for every one).
    """
    for conn in connections.all(initialized_only=True):
        if conn.vendor == "sqlite" and not conn.errors_occurred:
            continue
        conn.close_if_unusable_or_obsolete()


def in_transaction() -> bool:
    return any(conn.in_atomic_block for conn in connections.all(initialized_only=True))


def drop_connections() -> None:
    """Close every connection of this thread; the next query opens (or takes from the pool) a new one."""
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except CONNECTION_LOST:
            conn.connection = None  # already gone: nothing left to close


def db_step[R](fn: Callable[..., R]) -> Callable[..., Awaitable[R]]:
    """A synchronous database step run off the event loop on the shared database thread."""
    return SyncToAsync(resilient(fn), thread_sensitive=True)


def database_sync_to_async[R](fn: Callable[..., R], *, thread_sensitive: bool = True) -> Callable[..., Any]:
    """channels' database_sync_to_async, with the step retried once on a lost connection."""
    step: Callable[..., Any] = DatabaseSyncToAsync(resilient(fn), thread_sensitive=thread_sensitive)
    return step


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", repr(fn))
