"""Rooms: the sockets of a process that show one page to one audience, flushed as one.

A room is a page kind with what it was asked for (a task's page: the task and how many timeline
entries it shows; the task list: whether new tasks are added at the top; the inbox: its filters)
and an audience (roles, language, zone: tasksapp/live/pages.py). The room, not each socket, is
the member of the process's hub (tasksapp/live/hub.py) for the page's shared groups: a change is
queued once per room, the room flushes once per tick (on the grid of its page's coalescing
period), builds each frame once and hands the same string to every socket in it. Before, each
socket queued, woke, awaited the shared renders and packed its frames itself, though every socket
of an audience got the same frame: at 250 tabs that machinery cost 4-6x what handing a ready
frame to each socket does (docs/benchmarks.md, *Fan-out cost per frame*).

What a frame holds may depend on what a page already has. The room keeps that state (a task
page's sections and timeline as last sent, a task list's stale marks) for its sockets *in step*.
A socket that just joined is not in step: its page is as it was rendered. It gets the whole of
what changed (the same renders, without the difference) until it has had, whole, everything its
catch-up on connect found changed and its page's own state (a task page's task): from then on it
is in step.

Parts that depend on the socket's own page (pages.Choice: a new task's row added at the top only
of a page rendered before the task started; a question added to an inbox that does not show it
yet) are resolved per socket, and sockets that resolve them alike share one frame.

A socket's own work stays its own: its catch-up on connect (what changed since its page was
rendered, queued in its room), its session checks, its session's and user's groups.
"""

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import Coroutine, Hashable
from datetime import datetime
from typing import Any, Protocol

from tasksapp.lib.connections import database_sync_to_async
from tasksapp.live import frames, hub, inbox_badge, pages
from tasksapp.metrics import live_counts

log = logging.getLogger(__name__)

IN_STEP = True  # a socket's state in its room, else the items it is owed whole (None: not told yet)


class Socket(Protocol):
    """What a room needs of a socket (tasksapp.consumers.LiveConsumer)."""

    view: pages.LivePage  # the socket's own page: what it picks (pages.LivePage.pick) and catches up
    context: contextvars.Context  # the language and time zone the socket's page was opened with

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None: ...

    def hub_lost(self) -> None: ...


def until_tick(period: float) -> float:
    """Seconds to the next multiple of `period` on the monotonic clock: the rooms of a process
    flush on one grid, so what they render in a window is rendered once, in one batch
    (tasksapp/live/fanout.py). A change waits `period` at most (half of it on average)."""
    if period <= 0:
        return 0.0
    return period - (time.monotonic() % period)


class Room:
    def __init__(self, key: Hashable, view: pages.LivePage, context: contextvars.Context) -> None:
        self.key = key
        self.view = view  # its state is what every socket in step has
        self.context = context
        # socket -> IN_STEP, or the items it is still owed whole (None until its catch-up is queued)
        self.sockets: dict[Socket, bool | set[pages.Item] | None] = {}
        self.pending: dict[pages.Item, float] = {}  # item -> when the room learnt of it
        self.flushing: asyncio.Task[None] | None = None
        self.resyncing: asyncio.Task[None] | None = None
        self.joined: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.lost = False  # the hub lost its subscription: sockets joining now need a new room

    @property
    def size(self) -> int:  # the hub's log line counts sockets, not rooms
        return len(self.sockets)

    def groups(self) -> list[str]:
        """The page's groups and, on every page, the inbox badge's: all shared (hub.SHARED)."""
        found = self.view.groups()
        return found if inbox_badge.GROUP in found else [*found, inbox_badge.GROUP]

    # --- what the hub hands over ---------------------------------------------------------------

    def deliver(self, message: dict[str, Any]) -> None:
        """A message to one of the room's shared groups, in order (the hub checked its number)."""
        kind = message.get("type")
        if kind == "task.changed":
            if inbox_badge.is_badge_event(message):  # inbox: the nav badge on every page
                self.queue(inbox_badge.BADGE, time.monotonic())
                if not isinstance(self.view, pages.InboxPage):
                    return
            item = ("task", int(message["id"]))
            if self.view.wants(item):
                self.queue(item, time.monotonic())
        elif kind == "server.changed":
            self.queue(("server", int(message["id"])), time.monotonic())

    def resync(self, since: datetime) -> None:
        """The hub noticed lost messages to a group of this room: one catch-up for all its sockets."""
        self.resyncing = self.spawn(self._resync(since))

    def hub_lost(self) -> None:
        self.lost = True
        for socket in list(self.sockets):
            socket.hub_lost()

    # --- queueing and flushing ---------------------------------------------------------------

    def spawn(self, work: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
        """A task of the room's, in its sockets' language and zone. A copy each: tasks sharing one
        Context see each other's variables (asgiref's "already in the database thread" flag among
        them, which then refuses every other database step)."""
        return asyncio.create_task(work, context=self.context.copy())

    def queue(self, item: pages.Item, at: float) -> None:
        """Coalesce: a burst of changes to one item becomes one part, a burst of items one frame."""
        self.pending[item] = max(self.pending.get(item, at), at)
        if self.flushing is None or self.flushing.done():
            self.flushing = self.spawn(self._flush_soon())

    def queue_all(self, items: list[pages.Item], at: float) -> None:
        if items:  # inbox: the nav badge may have moved too
            self.queue(inbox_badge.BADGE, at)
        for item in items:
            self.queue(item, at)

    def caught_up(self, socket: Socket, items: list[pages.Item], at: float) -> None:
        """What changed since `socket`'s page was rendered (its catch-up on connect), queued: the
        socket is owed it whole, and its page's own state, before it is in step."""
        if self.sockets.get(socket, IN_STEP) is None:
            self.sockets[socket] = {*items, *socket.view.state_items()}
        self.queue_all(items, at)

    async def _resync(self, since: datetime) -> None:
        items = await database_sync_to_async(self.view.catch_up)(since)
        if items is None:
            await self.reload(list(self.sockets))
            return
        self.queue_all(items, time.monotonic())

    async def reload(self, sockets: list[Socket]) -> None:
        """Those sockets' pages reload their live region (what they have is not known any more)."""
        hint = frames.reload_hint([pages.RELOAD_REGION])
        for socket in sockets:
            if socket in self.sockets:
                self.sockets[socket] = set(socket.view.state_items())
                await _send(socket, hint)

    async def _flush_soon(self) -> None:
        while True:
            # Every round on the shared grid, also the rounds after the first: what arrived during
            # a round's renders waits for the next tick, with every other room's, so that their
            # renders are shared again.
            await asyncio.sleep(until_tick(self.view.coalesce))
            if not self.pending:
                return
            due, self.pending = self.pending, {}
            # Who joins while this round renders waits for the next (it is not in step).
            sockets = list(self.sockets.items())
            try:
                in_step, whole = await self._parts(due, joining=any(s is not IN_STEP for _, s in sockets))
            except Exception:  # the loop boundary of one room: its pages reload what they missed
                log.exception("live: rendering %s for a %s page failed", list(due), type(self.view).__name__)
                await self.reload([socket for socket, _ in sockets])
                continue
            await self._hand_out(sockets, due, in_step, whole)

    async def _hand_out(
        self,
        sockets: list[tuple[Socket, bool | set[pages.Item] | None]],
        due: dict[pages.Item, float],
        in_step: list[pages.Part],
        whole: list[pages.Part] | None,
    ) -> None:
        """Each socket its frames, built once for all the sockets that get the same parts and
        resolve the page's choices alike."""
        built: dict[tuple[bool, tuple[bool, ...]], list[str]] = {}
        for socket, state in sockets:
            if socket not in self.sockets:  # gone meanwhile
                continue
            parts = in_step if state is IN_STEP or whole is None else whole
            picks = tuple(socket.view.pick(part) for part in parts if isinstance(part, pages.Choice))
            shape = (parts is in_step, picks)
            found = built.get(shape)
            if found is None:
                found = built[shape] = frames.pack(pages.resolved(parts, picks))
                live_counts["frames_built"] += len(found)
            live_counts["frames_sent"] += len(found)
            if isinstance(state, set):  # it had these whole now (or as everyone, on a page that
                state.difference_update(due)  # does not remember what it sent)
                if not state:
                    self.sockets[socket] = IN_STEP
            for frame in found:
                await _send(socket, frame)

    async def _parts(
        self, due: dict[pages.Item, float], *, joining: bool
    ) -> tuple[list[pages.Part], list[pages.Part] | None]:
        """The parts for sockets in step (the room's state moves on to the renders'), and the same
        renders whole for sockets not in step, when there are some and the page remembers what it
        sent (else None). Both ask for the same renders: the second reuses the first's
        (tasksapp/live/shared.py, fanout.py)."""
        due = dict(due)
        badge = due.pop(inbox_badge.BADGE, None)
        first: list[pages.Part] = [await inbox_badge.fragment(badge)] if badge is not None else []
        in_step = first + await self.view.fragments_many(due) if due else first
        if not (joining and self.view.remembers):
            return in_step, None
        whole = first + await self.view.blank().fragments_many(due) if due else first
        return in_step, whole


async def _send(socket: Socket, frame: str) -> None:
    try:
        await socket.send(text_data=frame)
    except Exception:  # a socket closing under the send: it leaves its room in its disconnect
        log.debug("live: a frame to a closing socket was dropped", exc_info=True)


class Rooms:
    """This event loop's rooms (a process has one loop; tests make one per test)."""

    def __init__(self) -> None:
        self.rooms: dict[Hashable, Room] = {}

    async def join(self, socket: Socket) -> Room:
        """The socket's room (it is not in step yet), once the room gets its groups' messages."""
        key = socket.view.share_key()
        room = self.rooms.get(key)
        if room is not None and not room.lost:
            room.sockets[socket] = None
            await asyncio.shield(room.joined)
            return room
        room = self.rooms[key] = Room(key, socket.view.blank(), socket.context.copy())
        room.sockets[socket] = None
        try:
            for group in room.groups():
                await hub.hub().join(group, room)
        except BaseException as exc:
            if self.rooms.get(key) is room:
                del self.rooms[key]
            room.joined.set_exception(exc)
            room.joined.exception()  # retrieved: the sockets that joined meanwhile raise it above
            await hub.hub().leave(room)
            raise
        room.joined.set_result(None)
        return room

    async def leave(self, room: Room, socket: Socket) -> None:
        room.sockets.pop(socket, None)
        if room.sockets:
            return
        if self.rooms.get(room.key) is room:
            del self.rooms[room.key]
        for task in (room.flushing, room.resyncing):
            if task is not None:
                task.cancel()
        await hub.hub().leave(room)


_rooms: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Rooms]" = weakref.WeakKeyDictionary()


def rooms() -> Rooms:
    loop = asyncio.get_running_loop()
    found = _rooms.get(loop)
    if found is None:
        found = _rooms[loop] = Rooms()
    return found
