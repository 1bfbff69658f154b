"""Render once per change per audience, and hand the same string to every socket that needs it.

An audience is a page kind and a role (what the fragment may show): fragments carry no per-user
data, so the first socket of a process that needs a fragment renders it and every other socket
that received the same change awaits that render. A render may be shared with a socket only if
it started after the socket learnt of the change (`not_before`): it then reflects that change.
"""

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from tasksapp.connections import database_sync_to_async
from tasksapp.metrics import live_counts

KEEP_SECONDS = 30.0
PRUNE_ABOVE = 1024


@dataclass
class _Render:
    started: float
    result: "asyncio.Future[Any]"


_renders: dict[Hashable, _Render] = {}


async def render(
    key: Hashable, not_before: float, fn: Callable[[], Any], *, thread_sensitive: bool = True
) -> Any:
    """`fn()` run in a database thread, or the result of a run that started at or after `not_before`
    (time.monotonic()) for the same key."""
    entry = _renders.get(key)
    if entry is None or entry.started < not_before or (entry.result.done() and entry.result.exception()):
        started = time.monotonic()
        task = asyncio.ensure_future(database_sync_to_async(fn, thread_sensitive=thread_sensitive)())
        entry = _renders[key] = _Render(started, task)
        live_counts["renders"] += 1
        _prune(started)
    else:
        live_counts["renders_shared"] += 1
    # Shielded: a socket closing mid-render must not cancel the render the others wait for.
    return await asyncio.shield(entry.result)


def _prune(now: float) -> None:
    if len(_renders) <= PRUNE_ABOVE:
        return
    for key in [key for key, entry in _renders.items() if entry.started < now - KEEP_SECONDS]:
        del _renders[key]
