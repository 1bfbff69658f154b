"""Fan-out of task snapshots to open `subscriptions/listen` streams."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from .protocol import JsonObject


class StreamEnd(Enum):
    CLOSE = "close"  # the server ends the stream gracefully (shutdown, debug endpoint)
    DISCONNECT = "disconnect"  # the client went away


StreamItem = JsonObject | StreamEnd


@dataclass(eq=False)
class Subscription:
    task_ids: frozenset[str]
    queue: asyncio.Queue[StreamItem] = field(default_factory=asyncio.Queue)

    def push(self, item: StreamItem) -> None:
        self.queue.put_nowait(item)


class Hub:
    """Every open listen stream, so a task change reaches the ones watching it."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def open_count(self) -> int:
        return len(self._subscriptions)

    def subscribe(self, task_ids: frozenset[str]) -> Subscription:
        subscription = Subscription(task_ids)
        self._subscriptions.add(subscription)
        self._idle.clear()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)
        if not self._subscriptions:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Returns once no listen stream is open."""
        await self._idle.wait()

    def publish(self, task_id: str, snapshot: JsonObject) -> None:
        for subscription in self._subscriptions:
            if task_id in subscription.task_ids:
                subscription.push(snapshot)

    def close_all(self) -> int:
        """Asks every stream to end with its final response; returns how many were open."""
        for subscription in self._subscriptions:
            subscription.push(StreamEnd.CLOSE)
        return len(self._subscriptions)
