"""One subscription per process for the groups every page shares.

Every task change is published to the `tasks` group (and `inbox`, `servers`). Joined per socket,
one change would be one channel-layer message per open socket (docs/live.md says what that cost).
Here a process joins each shared group once, on a channel of its own, and hands each message to
its local rooms in memory (tasksapp/live/rooms.py: the sockets showing one page to one audience):
one message per process per change, whatever the number of tabs. A room only queues what changed
(its flush and the shared, batched renders do the rest), so handing over is cheap. Per-session
and per-user groups have few members and stay per socket.

The hub starts with its first socket and stops (leaving its groups) with its last. channels_redis
keeps all of a process's local channels (the sockets' and the hub's) in one Redis list:
dashboard/settings.py gives it room for 10,000 messages instead of 100. If the channel layer fails
under it (Redis gone), every socket it serves is closed, as a socket's own receive loop would be:
the pages reconnect and catch up (the outage is logged in a few lines per process, not once per
socket: tasksapp/redislayer.py). A lost message (a gap in a publisher's numbers) is noticed here,
once for the process, and all the group's sockets catch up from one query.
Group membership is renewed every REFRESH_SECONDS, below the layer's group expiry.
"""

import asyncio
import logging
import weakref
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from channels.layers import InMemoryChannelLayer, get_channel_layer

from tasksapp import events, redislayer
from tasksapp.live.numbering import Numbering

log = logging.getLogger(__name__)

SHARED = frozenset({events.TASKS, events.INBOX, events.SERVERS})  # the groups every page may share
REFRESH_SECONDS = 3600.0


class HubLost(Exception):
    """Raised in a socket whose process's subscription failed; the hub has logged why."""


class Member(Protocol):
    def deliver(self, message: dict[str, Any]) -> None: ...

    def resync(self, since: datetime) -> None: ...

    def hub_lost(self) -> None: ...


class Hub:
    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.members: defaultdict[str, set[Member]] = defaultdict(set)
        self.joined: set[str] = set()
        self.channel = ""
        self.running: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()
        self.delivered = 0
        self.numbering = Numbering()

    async def join(self, group: str, member: Member) -> None:
        """From now on `member` gets every message to `group` (in order, as the layer sent them)."""
        async with self.lock:
            if self.running is None or self.running.done():
                # The layer's own kind of process-local channel: channels_redis reads all of a
                # process's local channels from one Redis list, under one lock (another prefix
                # would wait behind the sockets' reads for ever).
                # The in-memory layer's channels are queues of their own: "hub" names this one, so
                # that dashboard/settings.py can give it room.
                memory = isinstance(self.layer, InMemoryChannelLayer)
                self.channel = await (self.layer.new_channel("hub") if memory else self.layer.new_channel())
                self.joined = set()
                self.numbering = Numbering()
                self.running = asyncio.create_task(self._run(self.channel), name="live-hub")
            if group not in self.joined:
                await self.layer.group_add(group, self.channel)
                self.joined.add(group)
            self.members[group].add(member)

    async def leave(self, member: Member) -> None:
        async with self.lock:
            for members in self.members.values():
                members.discard(member)
            if any(self.members.values()) or self.running is None:
                return
            running, self.running = self.running, None
            running.cancel()
            for group in self.joined:
                try:
                    await self.layer.group_discard(group, self.channel)
                except redislayer.UNREACHABLE as exc:  # the membership expires with the group
                    redislayer.reachability.failed("group(s) not left", exc)
                except Exception:  # a layer that fails forgets the membership anyway (expiry)
                    log.warning("live hub: could not leave group %s", group, exc_info=True)
            self.joined = set()

    async def _run(self, channel: str) -> None:
        refresh = asyncio.create_task(self._refresh(channel))
        try:
            while True:
                message = await self.layer.receive(channel)
                self._hand_out(message)
        except asyncio.CancelledError:
            raise
        except redislayer.UNREACHABLE as exc:  # counted in the process's few lines on the outage
            redislayer.reachability.failed("subscription(s) lost", exc)
            self._lost()
        except Exception:  # the layer failed: the sockets it fed would wait for nothing
            log.exception("live hub: the channel layer failed; closing this process's sockets to reconnect")
            self._lost()
        finally:
            refresh.cancel()

    def _hand_out(self, message: dict[str, Any]) -> None:
        group = str(message.get("group", ""))
        members = list(self.members.get(group, ()))
        gap = self.numbering.gap(message, group)
        if gap is not None:
            # Lost messages: every socket of the group catches up, from the same moment, so that
            # they share one query (pages.tasks_changed_since).
            log.warning(
                "live: %d message(s) to group %s were dropped before reaching this process (publisher "
                "%s: number %d after %d); its %d socket(s) catch up",
                gap.lost,
                group,
                gap.publisher,
                gap.number,
                gap.after,
                sum(getattr(member, "size", 1) for member in members),  # a room is many sockets
            )
            for member in members:
                try:
                    member.resync(gap.since)
                except Exception:  # one socket's fault must not starve the others
                    log.exception("live hub: a socket's catch-up failed to start")
            return
        # In order. This is the one gap check of a live update: the sockets trust what they are handed.
        for member in members:
            try:
                member.deliver(message)
            except Exception:  # one socket's fault must not starve the others
                log.exception("live hub: handing a message to a socket failed")
        self.delivered += 1

    def _lost(self) -> None:
        lost = {member for members in self.members.values() for member in members}
        self.members.clear()
        self.joined = set()
        self.running = None
        for member in lost:
            member.hub_lost()

    async def _refresh(self, channel: str) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            for group in list(self.joined):
                await self.layer.group_add(group, channel)


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub]" = weakref.WeakKeyDictionary()


def hub(layer_factory: Callable[[], Any] = get_channel_layer) -> Hub:
    """This event loop's hub (a process has one loop; tests make one per test)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = Hub(layer_factory())
    return found
