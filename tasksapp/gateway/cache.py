"""What a gateway process keeps between requests: who a token is (the caller) and the agents'
mirrored tasks, so that a tasks/get while the mirror is fresh takes no database step at all.

Nothing is kept for longer than MCP_GATEWAY_CACHE_MS (1000): a token revoked, an agent's scope
or a server changed in any process stops counting here within that, and at once for changes saved
in this process (the ORM's signals; `agent_revoke` updates in place, so this process also waits at
most that long). A task is also kept only while the mirror counts it fresh, and is dropped as soon
as the live hub hands this process a change to it (every write to the mirror publishes one, from
any process that shares the channel layer), when the gateway itself writes it, and all at once
when the hub reports lost messages or is lost. A read that a change overtook is not kept: entries
carry the generation they were read in.
"""

import asyncio
import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from tasksapp import events
from tasksapp.gateway.mirror import MirroredTask
from tasksapp.live.hub import hub
from tasksapp.mcpclient.wire import InputKinds
from tasksapp.models import Agent, McpServer

_generations = itertools.count(1)
_settings_generation = next(_generations)  # bumped by any agent or server saved in this process


def _seconds() -> float:
    return float(settings.MCP_GATEWAY_CACHE_MS) / 1000.0


class Recent[K, V]:
    """At most `size` values, least recently used dropped first, each until its deadline."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, tuple[float, int, V]] = OrderedDict()

    def get(self, key: K, generation: int, now: float) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] <= now or item[1] != generation:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return item[2]

    def put(self, key: K, value: V, generation: int, until: float) -> list[V]:
        """Keep `value`; returns the values dropped to make room."""
        self._items[key] = (until, generation, value)
        self._items.move_to_end(key)
        dropped = []
        while len(self._items) > self.size:
            dropped.append(self._items.popitem(last=False)[1][2])
        return dropped

    def pop(self, key: K) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()


def settings_generation() -> int:
    return _settings_generation


@receiver(post_save, sender=Agent, dispatch_uid="gateway.cache.agent_saved")
@receiver(post_delete, sender=Agent, dispatch_uid="gateway.cache.agent_deleted")
@receiver(post_save, sender=McpServer, dispatch_uid="gateway.cache.server_saved")
@receiver(post_delete, sender=McpServer, dispatch_uid="gateway.cache.server_deleted")
@receiver(m2m_changed, sender=Agent.servers.through, dispatch_uid="gateway.cache.scope_changed")
def _settings_changed(**kwargs: Any) -> None:
    """Any thread: a new generation makes every kept caller and task read again (assignment is atomic)."""
    global _settings_generation
    _settings_generation = next(_generations)


class Callers[V]:
    """(token digest, server id) -> the caller, for at most MCP_GATEWAY_CACHE_MS."""

    def __init__(self, size: int = 4096) -> None:
        self._recent: Recent[tuple[str, int], V] = Recent(size)

    def get(self, digest: str, server_id: int) -> V | None:
        return self._recent.get((digest, server_id), settings_generation(), time.monotonic())

    def put(self, digest: str, server_id: int, caller: V, generation: int) -> None:
        seconds = _seconds()
        if seconds > 0:
            self._recent.put((digest, server_id), caller, generation, time.monotonic() + seconds)


@dataclass
class KeptTask:
    """A mirrored task as read, and its tasks/get results already rendered, per kinds declared."""

    task: MirroredTask
    rendered: dict[InputKinds, bytes] = field(default_factory=dict)


TaskKey = tuple[int, int, str]  # (server pk, agent pk, task id): one agent's entry is no other's


class Tasks:
    """The agents' tasks as last read from the mirror; a member of this process's live hub."""

    def __init__(self, size: int = 4096) -> None:
        self._recent: Recent[TaskKey, KeptTask] = Recent(size)
        self._keys: dict[int, set[TaskKey]] = {}  # task pk -> its keys (one per task in practice)
        self._changes = 0  # hub changes handed over so far: a read they overtook is not kept
        self._joined: asyncio.AbstractEventLoop | None = None  # the loop whose hub hands changes over

    def generation(self) -> tuple[int, int]:
        """Taken before a read; put() keeps the read only if nothing changed meanwhile."""
        return settings_generation(), self._changes

    def get(self, key: TaskKey, now: datetime) -> KeptTask | None:
        kept = self._recent.get(key, settings_generation(), time.monotonic())
        if kept is not None and not kept.task.fresh(now):
            self._recent.pop(key)
            return None
        return kept

    async def put(self, key: TaskKey, kept: KeptTask, generation: tuple[int, int], now: datetime) -> None:
        """Keep a task read since `generation` was taken, unless a change overtook the read."""
        task = kept.task
        seconds = _seconds()
        if seconds <= 0 or generation != self.generation() or task.expired or not task.fresh(now):
            return
        if self._joined is not asyncio.get_running_loop():
            await hub().join(events.TASKS, self)
            self._joined = asyncio.get_running_loop()
            if generation != self.generation():
                return
        dropped = self._recent.put(key, kept, generation[0], time.monotonic() + seconds)
        self._keys.setdefault(task.pk, set()).add(key)
        for old in dropped:
            self._keys.pop(old.task.pk, None)

    def drop(self, pk: int) -> None:
        self._changes += 1
        for key in self._keys.pop(pk, ()):
            self._recent.pop(key)

    def clear(self) -> None:
        self._changes += 1
        self._recent.clear()
        self._keys.clear()

    # --- the hub's Member protocol -------------------------------------------------------

    def deliver(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("id"), int):
            self.drop(message["id"])

    def resync(self, since: datetime) -> None:
        self.clear()

    def hub_lost(self) -> None:
        self._joined = None
        self.clear()
