"""One websocket per page. Thin and read-only: join the page's groups, catch up on what changed
since the page was rendered, then send what changes, coalesced, as out-of-band swaps.

What a page kind is sent lives in tasksapp/live/pages.py; the sockets of a process that show one
page to one audience are a room (tasksapp/live/rooms.py), which queues each change once, renders
it once and hands the same frames to each of them; frames are capped (tasksapp/live/frames.py). The
socket closes when its session ends (logout, deactivation, password change; checked on a timer
too) and after LIVE_SOCKET_MAX_SECONDS, when the page reconnects and catches up. docs/live.md.
"""

import asyncio
import contextvars
import logging
import time
import zoneinfo
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import timezone, translation
from django.utils.html import escape

from tasksapp import events, prefs, redislayer
from tasksapp.lib.connections import database_sync_to_async
from tasksapp.live import frames, hub, pages, rooms
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
        finally:  # also when `connect` failed after joining its room: no dead socket left in it
            await self._stop()

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
        # The language and zone _open activated live in this context: the socket's room renders in
        # a copy of it (what the hub hands over runs in the hub's task).
        self.context = contextvars.copy_context()
        self.user_pk = user.pk
        self.session_key = session_key_of(self.scope)
        self.joined = time.monotonic()
        joined_at = datetime.now(UTC)
        await self._join()
        redislayer.reachability.worked()
        await self.accept()
        self.watch = asyncio.create_task(self._watch_session())
        if "since" in params:  # a page (not a script, a test): it catches up
            await self._in_step(joined_at)
        else:
            self.room.caught_up(self, [], time.monotonic())

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
        """Its room (which receives the page's shared groups), then its session's and its user's
        groups, joined by the socket itself."""
        self.room = await rooms.rooms().join(self)
        self.groups = [events.session_group(self.session_key), events.user_group(self.user_pk)]
        for group in self.groups:
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
            await self.channel_layer.group_discard(group, self.channel_name)

    async def _stop(self) -> None:
        """This socket's own task cancelled and its place in its room given up (once: it runs on
        a disconnect and again as the consumer ends)."""
        watch = getattr(self, "watch", None)
        if watch is not None:
            watch.cancel()
        room = getattr(self, "room", None)
        if room is not None:
            del self.room
            await rooms.rooms().leave(room, self)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing is accepted from the browser: actions are CSRF-protected POSTs."""

    # --- what the room and the channel layer deliver ------------------------------------------

    def hub_lost(self) -> None:
        """The hub's channel layer failed under this socket's room: end as a failed receive does
        (__call__), so that the page reconnects and catches up."""
        if not self.hub_gone.done():
            self.hub_gone.set_result(None)

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

    async def _catch_up(self, since: datetime) -> None:
        """What changed since `since`, queued in the room (sent to this socket whole, the first time)."""
        items = await database_sync_to_async(self.view.catch_up)(since)
        if items is None:
            await self.send(text_data=frames.reload_hint([pages.RELOAD_REGION]))
            items = []  # the page reloads its live region: it is as the room's renders from now on
        self.room.caught_up(self, items, time.monotonic())  # a render from before may predate them

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


def _since(text: str) -> datetime:
    """The page's render time (seconds since the epoch, to the microsecond, from the page); now if
    absent or odd."""
    now = datetime.now(UTC)
    try:
        value = datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):
        return now
    return min(value, now)
