"""One websocket per page. Thin and read-only: join the page's groups, catch up on what changed
since the page was rendered, then send what changes, coalesced, as out-of-band swaps.

What a page kind is sent lives in tasksapp/live/pages.py; renders are shared between sockets of
the same audience (tasksapp/live/shared.py); frames are capped (tasksapp/live/frames.py). The
socket closes when its session ends (logout, deactivation, password change; checked on a timer
too) and after LIVE_SOCKET_MAX_SECONDS, when the page reconnects and catches up. docs/live.md.
"""

import asyncio
import contextvars
import logging
import time
import zoneinfo
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import timezone, translation
from django.utils.html import escape

from tasksapp import events, prefs, redislayer
from tasksapp.lib.connections import database_sync_to_async
from tasksapp.live import frames, hub, inbox_badge, pages
from tasksapp.live.session import session_key_of, still_signed_in
from tasksapp.notify import send
from tasksapp.permissions import VIEW, can

log = logging.getLogger(__name__)

PAGES = {"overview", "tasks", "task", "inbox", "servers"}
REFUSED = 4403  # not signed in, or no role that may view
SIGNED_OUT = 4401  # the session ended while the page was open: app.js says "you were signed out"
LIFETIME = 4408  # the socket lived LIVE_SOCKET_MAX_SECONDS: app.js reconnects at once and catches up


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    groups: list[str]
    view: pages.LivePage

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """As channels runs a consumer, except when the channel layer fails under the socket (Redis
        unreachable on a join or the socket's own receive, or the process's hub lost): its tasks
        stop and the error goes on to Daphne, which closes the socket as after any failure (1011,
        or 500 during the handshake); the page reconnects with back-off. An application itself may
        close with 1000 or 3000-4999 only. The failure is one of the outage's few log lines
        (tasksapp.logfilters.LayerFailuresCounted), not a traceback a socket."""
        self.hub_gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            await super().__call__(scope, self._unless_hub_gone(receive), send)
        except (hub.HubLost, *redislayer.UNREACHABLE):
            await self._stop()
            raise

    def _unless_hub_gone(self, receive: Any) -> Any:
        """The client's next message, or a "websocket.hub_lost" of ours once the hub is gone: it
        fails in dispatch, where channels ends the socket's other receive too."""

        async def next_message() -> Any:
            message = asyncio.ensure_future(receive())
            try:
                await asyncio.wait([message, self.hub_gone], return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not message.done():
                    message.cancel()
            if message.done() and not message.cancelled():
                return message.result()
            return {"type": "websocket.hub_lost"}

        return next_message

    async def websocket_hub_lost(self, message: dict[str, Any]) -> None:
        raise hub.HubLost("the process's subscription to the shared groups failed")

    async def connect(self) -> None:
        user = self.scope.get("user")
        params = {
            key: values[0] for key, values in parse_qs(self.scope.get("query_string", b"").decode()).items()
        }
        view = await self._open(user, params)
        if view is None:
            await self.close(code=REFUSED)
            return
        self.view = view
        # The language and zone _open activated live in this context: what the hub hands over runs
        # in the hub's task, so the work it starts for this socket is spawned in this one (_spawn).
        self.context = contextvars.copy_context()
        self.user_pk = user.pk
        self.session_key = session_key_of(self.scope)
        self.pending: dict[pages.Item, float] = {}
        self.flushing: asyncio.Task[None] | None = None
        self.joined = time.monotonic()
        joined_at = datetime.now(UTC)
        await self._join()
        redislayer.reachability.worked()
        await self.accept()
        self.watch = asyncio.create_task(self._watch_session())
        if "since" in params:  # a page (not a script, a test): it catches up
            await self._in_step(joined_at)

    async def _open(self, user: Any, params: dict[str, str]) -> pages.LivePage | None:
        """The page this socket follows, or None when it may not be opened. Activates the page's
        language and the reader's time zone for this consumer's task (and the renders it starts,
        which copy its context); both are part of the audience, so renders are shared per each."""
        page = params.get("page", "")
        if user is None or page not in PAGES or not await database_sync_to_async(can)(user, VIEW):
            return None
        code = await database_sync_to_async(prefs.language_for_scope)(self.scope)
        translation.activate(code)
        zone = await database_sync_to_async(prefs.zone_for_scope)(self.scope)
        timezone.activate(zoneinfo.ZoneInfo(zone))
        audience = await database_sync_to_async(pages.audience)(user)
        roles = (*audience, (f"language:{code}", True), (f"zone:{zone}", True))
        return pages.page_for(page, params, roles, _since(params.get("since", "")))

    async def _join(self) -> None:
        """The page's groups, its session's and its user's, and the inbox badge's on every page."""
        self.groups = [
            *self.view.groups(),
            events.session_group(self.session_key),
            events.user_group(self.user_pk),
        ]
        if inbox_badge.GROUP not in self.groups:
            self.groups.append(inbox_badge.GROUP)
        for group in self.groups:
            if group in hub.SHARED:  # one subscription per process (tasksapp/live/hub.py)
                await hub.hub().join(group, self)
            else:
                await self.channel_layer.group_add(group, self.channel_name)

    async def _in_step(self, joined_at: datetime) -> None:
        """In step from here on: a reconnecting page asks for what changed since this moment, and
        this one catches up on what changed since its page was rendered."""
        stamp = int((joined_at - pages.MARGIN).timestamp())
        await self.send(
            text_data=f'<div id="live-sync" hidden hx-swap-oob="true" data-since="{escape(stamp)}"></div>'
        )
        await self._catch_up(self.view.page_since - pages.MARGIN)
        notes = await database_sync_to_async(send.browser_notes_since)(self.user_pk, self.view.page_since)
        for note in notes:  # sent while this page was loading or reconnecting
            await self.notify_browser(note)

    async def disconnect(self, code: int) -> None:
        await self._stop()
        for group in getattr(self, "groups", []):
            if group not in hub.SHARED:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def _stop(self) -> None:
        """This socket's own tasks cancelled and its place in the process's hub given up."""
        for task in (
            getattr(self, "watch", None),
            getattr(self, "flushing", None),
            getattr(self, "resync_task", None),
        ):
            if task is not None:
                task.cancel()
        if hasattr(self, "groups"):
            await hub.hub().leave(self)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing is accepted from the browser: actions are CSRF-protected POSTs."""

    # --- what the hub and the channel layer deliver -------------------------------------------

    def deliver(self, message: dict[str, Any]) -> None:
        """A message to a shared group, handed over by this process's hub (tasksapp/live/hub.py),
        which has checked its number already: every task and server change reaches a socket so."""
        kind = message.get("type")
        if kind == "task.changed":
            self._task_changed(message)
        elif kind == "server.changed":
            self._server_changed(message)

    def resync(self, since: datetime) -> None:
        """The hub noticed lost messages to a group of this page: catch up on what changed since."""
        self.resync_task = self._spawn(self._catch_up(since))

    def hub_lost(self) -> None:
        """The hub's channel layer failed: end as a failed receive does (__call__), so that the
        page reconnects and catches up."""
        if not self.hub_gone.done():
            self.hub_gone.set_result(None)

    def _task_changed(self, event: dict[str, Any]) -> None:
        if inbox_badge.is_badge_event(event):  # inbox: the nav badge on every page
            self._queue(inbox_badge.BADGE)
            if not isinstance(self.view, pages.InboxPage):
                return
        item = ("task", int(event["id"]))
        if self.view.wants(item):
            self._queue(item)

    def _server_changed(self, event: dict[str, Any]) -> None:
        self._queue(("server", int(event["id"])))

    async def notify_browser(self, event: dict[str, Any]) -> None:
        """A browser notification for this user (tasksapp/notify/send.py): static/tasksapp/notify.js
        shows it when the person allowed notifications. Sent to this user's sockets only."""
        url = str(event.get("url", ""))
        fields = {
            "key": str(event.get("key", ""))[:100],
            "text": str(event.get("text", ""))[:300],
            "url": url if url.startswith("/") and not url.startswith("//") else "",
        }
        data = " ".join(f'data-{name}="{escape(value)}"' for name, value in fields.items())
        await self.send(text_data=f'<div id="notify-push" hidden hx-swap-oob="true" {data}></div>')

    async def session_ended(self, event: dict[str, Any]) -> None:
        await self.close(code=SIGNED_OUT)

    # --- sending -------------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
        """A task of this socket's, in its context (language, zone), whoever asked for it. A copy
        each: tasks sharing one Context see each other's variables (asgiref's "already in the
        database thread" flag among them, which then refuses every other database step)."""
        return asyncio.create_task(work, context=self.context.copy())

    def _queue(self, item: pages.Item) -> None:
        """Coalesce: a burst of changes to one item becomes one fragment, a burst of items one frame."""
        self.pending[item] = time.monotonic()
        if self.flushing is None or self.flushing.done():
            self.flushing = self._spawn(self._flush_soon())

    async def _flush_soon(self) -> None:
        while True:
            # Every round on the shared grid, also the rounds after the first: what arrived during
            # a round's renders waits for the next tick, with every other socket's, so that their
            # renders are shared again (going round at once, each socket drifted off the grid
            # under load and rendered for itself: 1,020 overview renders where 200 would do).
            await asyncio.sleep(_until_tick(self.view.coalesce))
            if not self.pending:
                return
            due, self.pending = self.pending, {}
            fragments: list[pages.Fragment] = []
            try:
                # All at once, so that the renders of one flush (and of every socket flushing on
                # the same tick) join one batch (tasksapp/live/fanout.py); in order.
                badge = due.pop(inbox_badge.BADGE, None)  # inbox: the nav badge on every page
                if badge is not None:
                    fragments.append(await inbox_badge.fragment(badge))
                fragments += await self.view.fragments_many(due)
            except Exception:  # the loop boundary of one socket: the page reloads what it missed
                log.exception("live: rendering %s for a %s page failed", list(due), type(self.view).__name__)
                fragments.append((pages.RELOAD_REGION, frames.reload_hint([pages.RELOAD_REGION])))
            for frame in frames.pack(fragments):
                await self.send(text_data=frame)

    async def _catch_up(self, since: datetime) -> None:
        items = await database_sync_to_async(self.view.catch_up)(since)
        if items is None:
            await self.send(text_data=frames.reload_hint([pages.RELOAD_REGION]))
            return
        asked = time.monotonic()  # a render from before this moment may predate what changed
        if items:  # inbox: the nav badge may have moved too
            self.pending[inbox_badge.BADGE] = asked
        for item in items:
            self.pending[item] = max(self.pending.get(item, asked), asked)
        if self.pending and (self.flushing is None or self.flushing.done()):
            self.flushing = self._spawn(self._flush_soon())

    # --- the session ---------------------------------------------------------------------------

    async def _watch_session(self) -> None:
        """Close when the session is gone or the user inactive (checked every LIVE_SESSION_CHECK_
        SECONDS) and when the socket reaches LIVE_SOCKET_MAX_SECONDS."""
        ends = self.joined + settings.LIVE_SOCKET_MAX_SECONDS
        check = database_sync_to_async(still_signed_in)
        while True:
            checked = datetime.now(UTC)
            await asyncio.sleep(max(0.0, min(settings.LIVE_SESSION_CHECK_SECONDS, ends - time.monotonic())))
            if time.monotonic() >= ends:
                await self.close(code=LIFETIME)
                return
            if not await check(self.session_key, self.user_pk):
                await self.close(code=SIGNED_OUT)
                return
            if isinstance(self.view, pages.TaskPage):
                # A dropped last message is followed by no gap to notice: a task's page re-reads
                # its task on this timer too (sections it already has are not sent again).
                await self._catch_up(checked - pages.MARGIN)


def _until_tick(period: float) -> float:
    """Seconds to the next multiple of `period` on the monotonic clock: the sockets of a process
    flush on one grid, so what they render in a window is rendered once, in one batch. A change
    waits `period` at most (half of it on average)."""
    if period <= 0:
        return 0.0
    return period - (time.monotonic() % period)


def _since(text: str) -> datetime:
    """The page's render time (seconds since the epoch, to the microsecond, from the page); now if
    absent or odd."""
    now = datetime.now(UTC)
    try:
        value = datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):
        return now
    return min(value, now)
