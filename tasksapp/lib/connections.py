"""Database access that survives a dropped connection (a PostgreSQL restart, pg_terminate_backend).

Django replaces a broken connection only between HTTP requests. The worker and the websocket
consumers make no requests, so their steps go through `resilient`: connections that are stale
(or that failed before) are handed back before the step and after it, and a step whose
connection died under it is run once more on a fresh connection. With the connection pool
(docs/deploy.md) a fresh connection is a checked one from the pool.

Page loads: the pool hands out only checked connections, but a connection can still die while a
request is using it. A read-only request (GET, HEAD) that failed that way is answered once more
on a new connection instead of with a 500 (tasksapp.middleware.RetryLostConnectionMiddleware);
anything that writes is left to the person to repeat.
"""

import asyncio
import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from channels.db import DatabaseSyncToAsync
from django.core.signals import got_request_exception
from django.db import InterfaceError, InternalError, OperationalError, connections
from django.dispatch import receiver
from django.http import HttpRequest

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


SAFE_METHODS = ("GET", "HEAD")
# A page load is tried at most this many times. During a restart, or a failover's cut-over,
# connections are cut more than once a second, and one cut can cost two attempts: the connection
# it killed, and a pooled one whose backend it killed too but that passed the pool's check before
# that backend had exited (seen in a clean-clone run: 500 on the third attempt after two cuts).
PAGE_ATTEMPTS = 5


@receiver(got_request_exception)
def _note_lost_connection(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """Notes on the request that its connection was lost, if one more attempt is allowed."""
    exc = sys.exc_info()[1]
    if request is None or not isinstance(exc, CONNECTION_LOST):
        return
    losses = getattr(request, "_connection_losses", 0) + 1
    request._connection_losses = losses  # type: ignore[attr-defined]
    request._connection_lost = losses < PAGE_ATTEMPTS  # type: ignore[attr-defined]


ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class _RequestThread(ThreadPoolExecutor):
    """The one thread a page load's synchronous code runs in (what Django's ASGIHandler gets from
    its ThreadSensitiveContext), noting whether anything ran in it."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.used = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.used = True
        return super().submit(fn, *args, **kwargs)


class HandBackConnections:
    """Around Django's pages (dashboard/asgi.py): whatever way a page load ends, its thread hands
    its database connections back (to the pool) before the thread ends, in that thread.

    Django does that only in request_finished, which it skips when the client left and Daphne
    cancelled the request (--application-close-timeout after the disconnect) while its view was
    still waiting on the database: the thread went on, took a pooled connection, and ended with
    it, so the pool counted it as lent forever (DATABASE_POOL_SIZE such requests and every page
    waited DATABASE_POOL_TIMEOUT, then failed). The hand-back is queued behind the thread's work,
    so it never closes a connection a view still uses; a cancelled request does not wait for it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        thread = _RequestThread()
        cancelled = False
        try:
            async with ThreadSensitiveContext(executor=thread):  # Django's own is then a no-op
                await self.app(scope, receive, send)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            handed_back = thread.submit(_hand_back) if thread.used else None
            thread.shutdown(wait=False)
            if handed_back is not None and not cancelled:
                await asyncio.shield(asyncio.wrap_future(handed_back))


def _hand_back() -> None:
    try:
        drop_connections()
    except Exception:  # the thread's last act: nobody else would hear of it
        log.exception("could not hand back a request's database connections")
