"""The live layer's one kind of cache: what was rendered (or read) for a key, and when that started.

Shared renders (tasksapp/live/shared.py), fan-out batches (tasksapp/live/fanout.py), the catch-up
query and timeline entries (tasksapp/live/pages.py) each keep one RenderCache.
"""

import asyncio
import math
import time
from collections import OrderedDict  # popitem(last=False) stays O(1); a dict's first key slows as keys go
from collections.abc import Callable, Hashable
from typing import Any

from tasksapp.metrics import live_counts


def _always(value: object) -> bool:
    return True


def not_failed(result: "asyncio.Future[Any]") -> bool:
    """A render still running, or one that succeeded: others may wait for it or take its result."""
    return not (result.done() and result.exception())


class RenderCache[K: Hashable, V]:
    """Values by key, each with the time.monotonic() at which the work that made it started.

    A kept value is reused only by a caller whose `not_before` is at or before that start (the
    value then reflects whatever the caller had learnt of), and only while `usable(value)` holds.
    At most `size` values are kept: keeping one more drops the one that started first.

    Each reuse adds one to tasksapp.metrics.live_counts[reused], each value kept one to
    live_counts[kept].
    """

    def __init__(self, *, size: int, kept: str, reused: str, usable: Callable[[V], bool] = _always) -> None:
        self.size = size
        self._kept, self._reused, self._usable = kept, reused, usable
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K, not_before: float = -math.inf) -> V | None:
        """The kept value for `key` if it may be reused, else None (for values that are never None)."""
        item = self._reusable(key, not_before)
        return None if item is None else item[1]

    def put(self, key: K, value: V, started: float) -> None:
        """Keep `value` for `key` (replacing any), made by work that started at `started`."""
        self._items.pop(key, None)  # re-kept last: the oldest kept is always first
        self._items[key] = (started, value)
        live_counts[self._kept] += 1
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get_or_make(self, key: K, not_before: float, make: Callable[[], V]) -> V:
        """The kept value for `key` if it may be reused, else `make()`'s, kept as started now."""
        item = self._reusable(key, not_before)
        if item is not None:
            return item[1]
        started = time.monotonic()
        value = make()
        self.put(key, value, started)
        return value

    def _reusable(self, key: K, not_before: float) -> tuple[float, V] | None:
        item = self._items.get(key)
        if item is None or item[0] < not_before or not self._usable(item[1]):
            return None
        live_counts[self._reused] += 1
        return item
