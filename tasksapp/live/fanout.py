"""Batched renders for the fan-out (issue 13): rows that several sockets of one audience need in
the same flush are rendered in one database step, with one query.

tasksapp/live/shared.py renders each change once per audience, but one change at a time: at 100
task changes a second that is 200 steps a second (two roles) on the process's one database
thread, each paying for its own query, pool check-out and thread hop — more than the thread can
do, and every list page falls further behind (bench/fanout.py). Here a render asked for joins the
next batch of its kind and audience; the batch starts on the next turn of the event loop, so
every socket whose flush runs in the same turn joins it (the consumers flush on a shared
grid of LIVE_COALESCE_MS, tasksapp/consumers.py). The rule of shared.py holds: a result is
reused only if its batch started after the socket learnt of the change.

`BATCHING = False` turns batching off (each row rendered on its own, as before issue 13's
fan-out work); bench/fanout.py's `unbatched` mode does that, to compare.
"""

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from tasksapp.connections import database_sync_to_async
from tasksapp.live import shared

KEEP_SECONDS = 30.0
PRUNE_ABOVE = 4096


@dataclass
class _Batch:
    items: dict[Hashable, "asyncio.Future[Any]"] = field(default_factory=dict)


@dataclass
class _Done:
    started: float
    result: "asyncio.Future[Any]"


_pending: dict[Hashable, _Batch] = {}  # (kind, audience) -> the batch not started yet
_done: dict[tuple[Hashable, Hashable], _Done] = {}  # ((kind, audience), item) -> its latest render
_running: set["asyncio.Future[None]"] = set()
counts = {"batches": 0, "items": 0, "shared": 0}  # for benchmarks and tests


BATCHING = True


async def _render(group: Hashable, item: Hashable, not_before: float) -> Any:
    """The group's renderer's result for `item`, run for every item of `group` (a kind and an
    audience) asked in this turn of the event loop, in one database step; or the result of a
    batch that started at or after `not_before` (time.monotonic())."""
    done = _done.get((group, item))
    if (
        done is not None
        and done.started >= not_before
        and not (done.result.done() and done.result.exception())
    ):
        counts["shared"] += 1
        return await asyncio.shield(done.result)
    batch = _pending.get(group)
    if batch is None:
        batch = _pending[group] = _Batch()
        asyncio.get_running_loop().call_soon(_start, group)
    future = batch.items.get(item)
    if future is None:
        future = batch.items[item] = asyncio.get_running_loop().create_future()
    return await asyncio.shield(future)


def _start(group: Hashable) -> None:
    batch = _pending.pop(group)
    started = time.monotonic()
    for item, future in batch.items.items():
        _done[(group, item)] = _Done(started, future)
    counts["batches"] += 1
    counts["items"] += len(batch.items)
    shared.counts["renders"] += len(batch.items)
    task = asyncio.ensure_future(_run(batch, _renderers[group]))
    _running.add(task)  # held until done: the loop keeps only weak references to tasks
    task.add_done_callback(_running.discard)
    _prune(started)


_renderers: dict[Hashable, Callable[[list[Any]], dict[Any, Any]]] = {}


async def _run(batch: _Batch, render_many: Callable[[list[Any]], dict[Any, Any]]) -> None:
    items = list(batch.items)
    try:
        results = await database_sync_to_async(render_many)(items)
    except Exception as exc:  # every socket waiting on this batch hears of it (and reloads)
        for future in batch.items.values():
            if not future.done():
                future.set_exception(exc)
        return
    for item, future in batch.items.items():
        if not future.done():
            future.set_result(results.get(item))


def _prune(now: float) -> None:
    if len(_done) <= PRUNE_ABOVE:
        return
    for key in [key for key, entry in _done.items() if entry.started < now - KEEP_SECONDS]:
        del _done[key]


async def render_in_batch(
    group: Hashable,
    item: Hashable,
    not_before: float,
    render_many: Callable[[list[Any]], dict[Any, Any]],
) -> Any:
    """The entry point: batched, or one render per item (through shared.render) when batching is off."""
    if not BATCHING:
        return await shared.render((group, item), not_before, lambda: render_many([item]).get(item))
    _renderers[group] = render_many
    return await _render(group, item, not_before)
