"""Render once per change per audience, and hand the same string to every socket that needs it.

An audience is a page kind and a role (what the fragment may show): fragments carry no per-user
data, so the first socket of a process that needs a fragment renders it and every other socket
that received the same change awaits that render. A render may be shared with a socket only if
it started after the socket learnt of the change (`not_before`): it then reflects that change.
"""

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from tasksapp.lib.connections import database_sync_to_async
from tasksapp.live.cache import RenderCache, not_failed

_renders: RenderCache[Hashable, "asyncio.Future[Any]"] = RenderCache(
    size=1024, kept="renders", reused="renders_shared", usable=not_failed
)


async def render(
    key: Hashable, not_before: float, fn: Callable[[], Any], *, thread_sensitive: bool = False
) -> Any:
    """`fn()` run in a database thread, or the result of a run that started at or after `not_before`
    (time.monotonic()) for the same key.

    In one of the event loop's pool of threads by default, not on the process's one thread-sensitive
    thread: a busy task page's renders filled that thread (98 % busy, half of it waiting on
    PostgreSQL) while the loop idled, so one Daphne's change rate was capped by one thread. A
    render reads and renders only: it needs no thread of its own (connections come from the pool)."""

    return await made(key, not_before, database_sync_to_async(fn, thread_sensitive=thread_sensitive))


async def made(key: Hashable, not_before: float, make: Callable[[], Awaitable[Any]]) -> Any:
    """`await make()`, or the result of one that started at or after `not_before` for the same key."""

    def start() -> "asyncio.Future[Any]":
        return asyncio.ensure_future(make())

    # Shielded: a room closing mid-render must not cancel the render the others wait for.
    return await asyncio.shield(_renders.get_or_make(key, not_before, start))
