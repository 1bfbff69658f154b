"""The two baselines of bench/fanout_cost.py: Daphne + channels_redis delivering a pre-built frame,
with no rendering, configured as the product is (dashboard/settings.py's channel layer).

    REDIS_URL=redis://… FANOUT_FRAME_BYTES=1500 python -m daphne -p PORT bench.fanout_bare:application

- `/ws/bare-group/`: a plain AsyncWebsocketConsumer per socket joins the `tasks` group and sends the
  frame for each message it receives: one channel-layer message per socket per change.
- `/ws/bare-hub/`: one subscription for the process (set up before the first socket is accepted: a
  channel of the layer's own kind, joined to `tasks`, and a receive loop) hands the frame to every
  open socket in memory, as the product's hub does (tasksapp/live/hub.py): one message per process
  per change.

The messages are the product's own `task.changed` (the driver publishes them through
tasksapp.events). Any HTTP request answers 200 "up" (the readiness probe).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

GROUP = "tasks"  # tasksapp.events.TASKS


def prebuilt_frame(size: int) -> str:
    """A frame shaped like a task-list row update, padded with ASCII to `size` characters."""
    head = '<template><tbody hx-swap-oob="afterbegin:#task-rows"><tr id="task-row-0"><td>'
    tail = "</td></tr></tbody></template>"
    return head + "x" * max(0, size - len(head) - len(tail)) + tail


FRAME = prebuilt_frame(int(os.environ.get("FANOUT_FRAME_BYTES", "1500")))


class BareGroup(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    groups = [GROUP]

    async def task_changed(self, message: dict[str, Any]) -> None:
        await self.send(text_data=FRAME)


class _ProcessHub:
    """One channel-layer subscription for the process, handing every message to each socket."""

    def __init__(self) -> None:
        self.sockets: set[BareHub] = set()
        self.running: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()

    async def join(self, socket: BareHub) -> None:
        """Subscribed (the group joined) when this returns, as the product's hub is before it accepts."""
        async with self.lock:
            if self.running is None or self.running.done():
                layer = get_channel_layer()
                channel = await layer.new_channel()
                await layer.group_add(GROUP, channel)
                self.running = asyncio.create_task(self._run(layer, channel), name="bare-hub")
            self.sockets.add(socket)

    async def _run(self, layer: Any, channel: str) -> None:
        while True:
            await layer.receive(channel)
            for socket in list(self.sockets):
                await socket.send(text_data=FRAME)


_hub = _ProcessHub()


class BareHub(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    async def connect(self) -> None:
        await _hub.join(self)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        _hub.sockets.discard(self)


async def _up(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"up\n"})


application = ProtocolTypeRouter(
    {
        "http": _up,
        "websocket": URLRouter(
            [path("ws/bare-group/", BareGroup.as_asgi()), path("ws/bare-hub/", BareHub.as_asgi())]
        ),
    }
)
