"""Render once per change per audience, and hand the same string to every socket that needs it.

An audience is a page kind and a role (what the fragment may show): fragments carry no per-user
data, so the first socket of a process that needs a fragment renders it and every other socket
that received the same change awaits that render. A render may be shared with a socket only if
it started after the socket learnt of the change (`not_before`): it then reflects that change.
"""

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from channels.db import DatabaseSyncToAsync
from django.conf import settings

from tasksapp.lib.connections import resilient
from tasksapp.live.cache import RenderCache, not_failed

_renders: RenderCache[Hashable, "asyncio.Future[Any]"] = RenderCache(
    size=1024, kept="renders", reused="renders_shared", usable=not_failed
)


_threads: ThreadPoolExecutor | None = None
_threads_made = threading.Lock()


def threads() -> ThreadPoolExecutor:
    """The process's render threads (LIVE_RENDER_THREADS), made on first use."""
    global _threads
    with _threads_made:
        if _threads is None:
            _threads = ThreadPoolExecutor(settings.LIVE_RENDER_THREADS, thread_name_prefix="live-render")
        return _threads


def step[R](fn: Callable[..., R]) -> Callable[..., Awaitable[R]]:
    """`fn` as a database step in one of the process's render threads, not on its one thread-
    sensitive thread: a busy task page's renders filled that thread (98 % busy, half of it waiting
    on PostgreSQL) while the loop idled, so one Daphne's change rate was capped by one thread. Nor
    in the event loop's default executor, which the worker's name lookups and webhooks share. A
    render reads and renders only: it needs no thread of its own (connections come from the pool)."""
    made: Callable[..., Awaitable[R]] = DatabaseSyncToAsync(
        resilient(fn), thread_sensitive=False, executor=threads()
    )
    return made


async def render(key: Hashable, not_before: float, fn: Callable[[], Any]) -> Any:
    """`fn()` run in a render thread (step), or the result of a run that started at or after
    `not_before` (time.monotonic()) for the same key."""
    return await made(key, not_before, step(fn))


async def made(key: Hashable, not_before: float, make: Callable[[], Awaitable[Any]]) -> Any:
    """`await make()`, or the result of one that started at or after `not_before` for the same key."""

    def start() -> "asyncio.Future[Any]":
        return asyncio.ensure_future(make())

    # Shielded: a room closing mid-render must not cancel the render the others wait for.
    return await asyncio.shield(_renders.get_or_make(key, not_before, start))
