"""When each task a worker holds is next polled: a heap of due times, and the event the poll loop
sleeps on until the earliest of them (or a wake-up)."""

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Iterable

from tasksapp.engine.tracking import TrackedTask

# The poll loop wakes at most this often for polls that are not yet due: polls due within one step
# start together (a loop turn per due time cost a few microseconds a poll at 10,000 tasks, for lag
# of a fraction of a millisecond). A wake-up (a nudge, a task due at once) is never delayed by it.
WAKE_STEP_SECONDS = 0.005


class PollQueue:
    """(due, sequence, task id) entries; an entry whose due time no longer matches its task's is
    stale (the task was rescheduled) and is skipped by the caller."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, int, int]] = []  # a heap, earliest first
        self._seq = itertools.count()
        self._wake = asyncio.Event()

    def push(self, task: TrackedTask, delay: float) -> None:
        """Set the task's due time `delay` seconds from now; wake the loop if it is the earliest."""
        task.due = time.monotonic() + delay
        sooner = not self.entries or task.due < self.entries[0][0]
        heapq.heappush(self.entries, (task.due, next(self._seq), task.pk))
        if sooner:
            self._wake.set()  # the loop sleeps until the earliest due time it knew of

    def pop_due(self, now: float) -> tuple[float, int] | None:
        """The earliest entry due by `now`, as (due, task id), taken off the heap; None if none is."""
        if not self.entries or self.entries[0][0] > now:
            return None
        due, _, pk = heapq.heappop(self.entries)
        return due, pk

    def wake(self) -> None:
        self._wake.set()

    async def sleep(self, deadline: float | None) -> None:
        """Until the earliest due time (at least one wake step away), a wake-up, or `deadline`."""
        now = time.monotonic()
        wake_at = max(self.entries[0][0], now + WAKE_STEP_SECONDS) if self.entries else now + 1
        if deadline is not None:
            wake_at = min(wake_at, deadline)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, wake_at - time.monotonic()))

    def shift(self, seconds: float, tasks: Iterable[TrackedTask]) -> None:
        """Move every due time (the entries' and `tasks`') on by `seconds`, keeping their order."""
        self.entries = [(due + seconds, seq, pk) for due, seq, pk in self.entries]
        heapq.heapify(self.entries)
        for task in tasks:
            task.due += seconds
