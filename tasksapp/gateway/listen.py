"""subscriptions/listen for an agent's tasks, served from the mirror: also in front of servers that
have no listen of their own (fastmcp-tasks).

The acknowledgement names the ids the gateway will push: the agent's own tasks on this server
that are not expired (others are left out, as the spec has a server do with ids it will not
report on). Then a notifications/tasks frame with the full task, as tasks/get would show it, right
away and whenever it changes: changes reach the stream from the mirror (the process's live hub
hands it every task change, whoever made it), and while nothing else keeps the mirror fresh the
stream reads through at the task's poll interval, as tasks/get does (one poller in all). A task is
dropped from the stream once its terminal state was sent. `: ping` every
MCP_GATEWAY_KEEPALIVE_SECONDS; the stream lasts until the agent closes it, or until its token no
longer admits it to the server (revoked, or the server taken out of its scope): asked again every
MCP_GATEWAY_CACHE_MS (at least every second), the stream then ends.
"""

import asyncio
import contextlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from tasksapp import events
from tasksapp.gateway.auth import Authenticator, Caller
from tasksapp.gateway.envelope import Call
from tasksapp.gateway.errors import RATE_LIMITED, GatewayError, invalid_params, missing_tasks_capability
from tasksapp.gateway.http import SSE_PING, Receive, Send, SseResponse, wait_for_disconnect
from tasksapp.gateway.mirror import MirroredTask, freshness, mirrored
from tasksapp.gateway.tasks import TaskMethods
from tasksapp.lib import crypto
from tasksapp.lib.connections import db_step
from tasksapp.live.hub import hub
from tasksapp.mcpclient.wire import META_SUBSCRIPTION
from tasksapp.models import RemoteTask

log = logging.getLogger(__name__)
JsonObject = dict[str, Any]


class Listens:
    """The listen streams of this process, at most MCP_GATEWAY_MAX_STREAMS open per agent."""

    def __init__(self, tasks: TaskMethods, authenticator: Authenticator) -> None:
        self.tasks, self.authenticator = tasks, authenticator
        self.open: defaultdict[int, int] = defaultdict(int)

    async def serve(self, caller: Caller, call: Call, receive: Receive, send: Send) -> None:
        wanted = _task_ids(call)
        if wanted and not call.declares_tasks:
            raise missing_tasks_capability("subscriptions/listen with taskIds")
        if self.open[caller.agent.pk] >= settings.MCP_GATEWAY_MAX_STREAMS:
            raise GatewayError(
                429,
                RATE_LIMITED,
                f"Too many listen streams open for agent {caller.agent.name} (at most "
                f"{settings.MCP_GATEWAY_MAX_STREAMS}): close one first",
                headers=[(b"retry-after", b"5")],
            )
        watched = await db_step(_own)(caller, wanted)
        self.open[caller.agent.pk] += 1
        try:
            stream = ListenStream(self.tasks, caller, call, watched, send)
            stream.allowed = self.authenticator.still_allowed
            await stream.run(receive)
        finally:
            self.open[caller.agent.pk] -= 1


def _task_ids(call: Call) -> list[str]:
    notifications = call.params.get("notifications")
    if not isinstance(notifications, dict):
        raise invalid_params("subscriptions/listen needs params.notifications (an object)")
    ids = notifications.get("taskIds", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise invalid_params("notifications.taskIds must be an array of strings")
    return list(dict.fromkeys(ids))[:1000]


def _own(caller: Caller, wanted: list[str]) -> dict[int, str]:
    """task pk -> task id, for the asked ids that are the agent's own, unexpired tasks here."""
    hashes = {h: task_id for task_id in wanted for h in crypto.fingerprints(task_id)}
    rows = RemoteTask.objects.filter(
        server=caller.server, agent=caller.agent, expired=False, remote_id_hash__in=hashes
    ).values_list("pk", "remote_id_hash")
    return {pk: hashes[digest] for pk, digest in rows}


def _reread(pk: int, caller: Caller, task_id: str) -> MirroredTask | None:
    task = RemoteTask.objects.defer("arguments").filter(pk=pk).first()
    return None if task is None else mirrored(task, caller.server, task_id)


class ListenStream:
    """One agent's stream; a member of the process's hub for the `tasks` group."""

    def __init__(
        self, tasks: TaskMethods, caller: Caller, call: Call, watched: dict[int, str], send: Send
    ) -> None:
        self.tasks, self.caller, self.call = tasks, caller, call
        self.watched = watched
        self.sent: dict[int, str] = {}  # pk -> what was last pushed (without lastUpdatedAt)
        self.pending: set[int] = set(watched)
        self.due: dict[int, float] = {}  # pk -> when (monotonic) the mirror goes stale: read through
        self.wake = asyncio.Event()
        self.stream = SseResponse(send)
        self.ping_at = 0.0
        self.allowed: Callable[[Caller], Awaitable[bool]] | None = None
        self.check_at = 0.0  # when (monotonic) to ask again whether the token still admits the agent

    # --- the hub's Member protocol -------------------------------------------------------

    def deliver(self, message: dict[str, Any]) -> None:
        if message.get("id") in self.watched:
            self.pending.add(message["id"])
            self.wake.set()

    def resync(self, since: datetime) -> None:
        self.pending |= set(self.watched)
        self.wake.set()

    def hub_lost(self) -> None:
        """Changes from elsewhere stop arriving; the stream's own read-throughs go on."""
        log.warning(
            "gateway listen: the live hub was lost; agent %s's stream keeps polling", self.caller.agent
        )

    # --- the stream ----------------------------------------------------------------------

    async def run(self, receive: Receive) -> None:
        await self.stream.open()
        await self.stream.message(self._ack(list(self.watched.values())))
        self.ping_at = time.monotonic() + settings.MCP_GATEWAY_KEEPALIVE_SECONDS
        gone = asyncio.ensure_future(wait_for_disconnect(receive))
        await hub().join(events.TASKS, self)
        try:
            while not gone.done() and await self._still_allowed():
                await self._push_pending()
                await self._sleep(gone)
        finally:
            gone.cancel()
            await hub().leave(self)
            with contextlib.suppress(Exception):
                await self.stream.close()

    async def _still_allowed(self) -> bool:
        """False once the agent's token was revoked or the server left its scope: the stream ends."""
        now = time.monotonic()
        if self.allowed is None or now < self.check_at:
            return True
        self.check_at = now + _check_seconds()
        if await self.allowed(self.caller):
            return True
        log.info(
            "gateway listen: agent %s may no longer use %s; its stream ends",
            self.caller.agent,
            self.caller.server,
        )
        return False

    def _ack(self, honoured: list[str]) -> JsonObject:
        return {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {META_SUBSCRIPTION: self.call.id}, "notifications": {"taskIds": honoured}},
        }

    async def _sleep(self, gone: "asyncio.Future[None]") -> None:
        """Until a change, the next read-through due, the next keep-alive, or the agent leaving."""
        if self.pending:
            return  # delivered while the last ones were being pushed
        wake_at = min([self.ping_at, self.check_at, *self.due.values()])
        self.wake.clear()
        waiter = asyncio.ensure_future(self.wake.wait())
        either: set[asyncio.Future[Any]] = {waiter, gone}
        await asyncio.wait(
            either, timeout=max(0.01, wake_at - time.monotonic()), return_when="FIRST_COMPLETED"
        )
        waiter.cancel()
        now = time.monotonic()
        self.pending |= {pk for pk, at in self.due.items() if at <= now}
        if now >= self.ping_at and not gone.done():
            await self.stream.write(SSE_PING)
            self.ping_at = now + settings.MCP_GATEWAY_KEEPALIVE_SECONDS

    async def _push_pending(self) -> None:
        pending, self.pending = self.pending, set()
        for pk in sorted(pending & set(self.watched)):
            self.due.pop(pk, None)
            task = await db_step(_reread)(pk, self.caller, self.watched[pk])
            if task is not None and not task.fresh(timezone.now()):
                task = await self.tasks.refreshed(self.caller, task)
            if task is None or task.expired:
                self.watched.pop(pk, None)
                continue
            await self._send(pk, task)
            if task.terminal:
                self.watched.pop(pk, None)
            else:
                self.due[pk] = time.monotonic() + _seconds_until_stale(task)

    async def _send(self, pk: int, task: MirroredTask) -> None:
        view = task.view(self.call.input_kinds)
        shape = json.dumps({k: v for k, v in view.items() if k != "lastUpdatedAt"}, sort_keys=True)
        if self.sent.get(pk) == shape:
            return
        self.sent[pk] = shape
        params = {**view, "_meta": {META_SUBSCRIPTION: self.call.id}}
        await self.stream.message({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
        self.ping_at = time.monotonic() + settings.MCP_GATEWAY_KEEPALIVE_SECONDS


def _check_seconds() -> float:
    return max(1.0, settings.MCP_GATEWAY_CACHE_MS / 1000.0)


def _seconds_until_stale(task: MirroredTask) -> float:
    if task.last_polled_at is None or task.refresh_wanted_at is not None:
        return 0.05
    left = task.last_polled_at + freshness(task.poll_interval_ms) - timezone.now()
    return max(0.05, left.total_seconds())
