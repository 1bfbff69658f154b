"""Batched renders for the fan-out: rows that several sockets of one audience need in
the same flush are rendered in one database step, with one query.

tasksapp/live/shared.py renders each change once per audience, but one change at a time, each a
step of its own on the process's one database thread (docs/live.md says what that cost). Here a
render asked for joins the
next batch of its kind and audience; the batch starts on the next turn of the event loop, so
every socket whose flush runs in the same turn joins it (the consumers flush on a shared
grid of LIVE_COALESCE_MS, tasksapp/consumers.py). The rule of shared.py holds: a result is
reused only if its batch started after the socket learnt of the change.
"""

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tasksapp.live import shared
from tasksapp.live.cache import RenderCache, not_failed
from tasksapp.metrics import live_counts


@dataclass
class _Batch:
    items: set[Hashable] = field(default_factory=set)
    # One future for the whole batch (its results by item): a socket awaits the one or two batches
    # its rows are in, not a future per row (docs/live.md: per-row futures were most of a loaded
    # event loop).
    result: "asyncio.Future[dict[Any, Any]]" = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


_pending: dict[Hashable, _Batch] = {}  # (kind, audience) -> the batch not started yet
# ((kind, audience), item) -> the results of its latest batch; "renders" counts each row once.
_done: RenderCache[tuple[Hashable, Hashable], "asyncio.Future[dict[Any, Any]]"] = RenderCache(
    size=4096, kept="renders", reused="batch_shared", usable=not_failed
)
_running: set["asyncio.Future[None]"] = set()


def _future_for(group: Hashable, item: Hashable, not_before: float) -> "asyncio.Future[dict[Any, Any]]":
    """The batch whose results will hold `item` for the group's renderer (a kind and an audience):
    a batch that started at or after `not_before` (time.monotonic()), or the one starting on the
    next turn of the event loop, which every item asked for in this turn joins."""
    done = _done.get((group, item), not_before)
    if done is not None:
        return done
    batch = _pending.get(group)
    if batch is None:
        batch = _pending[group] = _Batch()
        asyncio.get_running_loop().call_soon(_start, group)
    batch.items.add(item)
    return batch.result


def _start(group: Hashable) -> None:
    batch = _pending.pop(group)
    started = time.monotonic()
    for item in batch.items:
        _done.put((group, item), batch.result, started)
    live_counts["batches"] += 1
    live_counts["batch_items"] += len(batch.items)
    task = asyncio.ensure_future(_run(batch, _renderers[group]))
    _running.add(task)  # held until done: the loop keeps only weak references to tasks
    task.add_done_callback(_running.discard)


_renderers: dict[Hashable, Callable[[list[Any]], dict[Any, Any]]] = {}


async def _run(batch: _Batch, renderer: Callable[[list[Any]], dict[Any, Any]]) -> None:
    try:
        results = await shared.step(renderer)(list(batch.items))  # in a render thread
    except Exception as exc:  # every socket waiting on this batch hears of it (and reloads)
        batch.result.set_exception(exc)
        batch.result.exception()  # retrieved: a batch nobody awaits any more is not "never retrieved"
        return
    batch.result.set_result(results)


async def render_many(
    group: Hashable,
    items: Sequence[tuple[Hashable, float]],
    renderer: Callable[[list[Any]], dict[Any, Any]],
) -> dict[Any, Any]:
    """The renderer's result for each (item, not_before), None for an item it did not return:
    one await per batch the items are in."""
    _renderers[group] = renderer
    futures: dict[asyncio.Future[dict[Any, Any]], list[Hashable]] = {}
    for item, not_before in items:
        futures.setdefault(_future_for(group, item, not_before), []).append(item)
    found: dict[Any, Any] = {}
    live_counts["batch_waits"] += len(futures)
    for future, wanted in futures.items():
        # Shielded: a socket closing mid-render must not cancel the render the others wait for.
        results = await asyncio.shield(future)
        for item in wanted:
            found[item] = results.get(item)
    return found
