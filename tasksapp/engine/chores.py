"""What runs beside the poll loop: the servers' clients and listeners, probes of idle failing
servers, and nudges from the channel layer. Each takes the Worker it serves."""

import asyncio
import contextlib
import logging
import random
import time
from datetime import datetime
from typing import TYPE_CHECKING

from tasksapp.connections import db_step
from tasksapp.engine import store
from tasksapp.engine.listener import ListenSupervisor
from tasksapp.engine.tracking import ServerState, backoff_delay
from tasksapp.mcpclient import McpClient, McpError, TransportError
from tasksapp.services.oauth import worker_auth
from tasksapp.services.remote import mcp_client

if TYPE_CHECKING:
    from tasksapp.engine.worker import Worker

log = logging.getLogger(__name__)
NUDGE_RETRY_MAX_SECONDS = 30.0


def sync_servers(worker: "Worker", rows: dict[int, store.ServerRow]) -> None:
    for pk in worker.servers.keys() - rows.keys():
        _drop_server(worker, pk)
    for pk, row in rows.items():
        current = worker.servers.get(pk)
        if current is not None and current.signature == row.signature:
            current.listen_wanted = row.listen_wanted and worker.listen
            current.recorded_failing, current.others_failing = row.failing, row.others_failing
            _yield_to_others(worker, current, row.others_success_at)
            continue
        state = ServerState(
            server_id=pk,
            name=row.name,
            client=_client(worker, row),
            signature=row.signature,
            listen_wanted=row.listen_wanted and worker.listen,
            recorded_failing=row.failing,
            others_failing=row.others_failing,
        )
        if current is not None:
            # An edit (URL, credentials, era, timeouts): the same tasks, asked through a new client
            # at once. Dropping them instead left their leases held and unrenewed, so nobody polled
            # them until the leases lapsed.
            state.remote_to_pk = current.remote_to_pk
            _retire(worker, pk)
            for task in worker.tasks.values():
                if task.server_id == pk and not task.in_flight:
                    worker.schedule(task, 0.0)
        worker.servers[pk] = state


def _yield_to_others(worker: "Worker", state: ServerState, answered_at: datetime | None) -> None:
    """Another worker got an answer from this server after this worker's back-off began: the
    back-off ends now and this worker's tasks there are polled again (spread as a takeover is),
    once per such answer. If the server fails this worker again, its back-off resumes, longer.

    Back-off lives in each worker's memory; without this a worker that failed during a flap kept
    waiting out a long back-off (minutes) while the server answered everyone else."""
    if answered_at is None or state.failed_at is None or not state.backing_off():
        return
    if answered_at <= state.failed_at or answered_at == state.yielded_to:
        return
    state.yielded_to, state.backoff_until = answered_at, 0.0
    tasks = [t for t in worker.tasks.values() if t.server_id == state.server_id and not t.in_flight]
    log.info(
        "worker %s: %s answered another worker at %s, after this worker's back-off began; retrying "
        "%d task(s) now",
        worker.name,
        state.name,
        answered_at.isoformat(timespec="seconds"),
        len(tasks),
    )
    window = max(1.0, min(5.0, len(tasks) / 100))
    for task in tasks:
        worker.schedule(task, random.uniform(0, window))


def _drop_server(worker: "Worker", pk: int) -> None:
    """The server was disabled or deleted: stop watching its tasks and give their leases back, so
    that they are claimed again at once if it is enabled again."""
    _retire(worker, pk)
    dropped = [t.pk for t in worker.tasks.values() if t.server_id == pk]
    for task_pk in dropped:
        worker.tasks.pop(task_pk)
    if dropped:
        worker.spawn(_release(worker, dropped))


async def _release(worker: "Worker", ids: list[int]) -> None:
    try:
        await db_step(store.release)(worker.name, ids)
    except Exception as exc:  # the leases lapse by themselves; nothing is lost by waiting for that
        log.warning("worker %s: could not give back %d leases (%s)", worker.name, len(ids), exc)


def _retire(worker: "Worker", pk: int) -> None:
    """Close a server's listener and client; the client once the polls using it have ended."""
    state = worker.servers.pop(pk)
    if listener := worker.listeners.pop(pk, None):
        worker.spawn(listener.close())
    worker.spawn(_close_when_idle(state))


async def _close_when_idle(state: ServerState) -> None:
    try:
        if state.polls_in_flight:
            await state.idle.wait()
    finally:
        await state.client.aclose()


def _client(worker: "Worker", row: store.ServerRow) -> McpClient:
    return mcp_client(
        url=row.url,
        headers={"User-Agent": f"mcp-tasks-dashboard/0.1 worker/{worker.name}", **row.headers},
        era=row.era,
        read_timeout=row.read_timeout,
        call_timeout=row.call_timeout,
        auth=worker_auth(row.pk, row.url, row.oauth) if row.oauth else None,
        transport=worker.transport_factory() if worker.transport_factory else None,
    )


def update_listeners(worker: "Worker") -> None:
    for pk, server in worker.servers.items():
        if not server.listen_wanted:
            if listener := worker.listeners.pop(pk, None):
                worker.spawn(listener.close())
            continue
        listener = worker.listeners.get(pk)
        if listener is None:
            listener = worker.listeners[pk] = ListenSupervisor(worker, server)
        listener.want(set(server.remote_to_pk))


def probe_idle_servers(worker: "Worker") -> None:
    """A server recorded as failing that has no task to poll is probed (server/discover) at the
    pace of its back-off, so its health turns back to healthy once it is back."""
    now = time.monotonic()
    for server in worker.servers.values():
        idle = not server.remote_to_pk and not server.probing
        if server.recorded_failing and idle and not server.backing_off(now):
            server.probing = True
            worker.spawn(_probe(worker, server))


async def _probe(worker: "Worker", server: ServerState) -> None:
    try:
        await server.client.discover()
    except TransportError as exc:
        await worker._server_failed(server, exc)
    except McpError:
        await worker._server_ok(server)  # an error answer is an answer: the server is reachable
    else:
        await worker._server_ok(server)
    finally:
        server.probing = False


async def follow_nudges(worker: "Worker") -> None:
    """Poll at once what an operator just answered or cancelled (needs a shared channel layer).

    A channel layer that fails (Redis restarting) is joined again with back-off; the nudges are
    a shortcut, polling stays the baseline.
    """
    from channels.layers import get_channel_layer

    from tasksapp import events, redislayer

    layer = get_channel_layer()
    if layer is None:
        return
    failures = 0
    channel = ""
    try:
        while True:
            try:
                channel = await layer.new_channel()
                await layer.group_add(events.WORKERS, channel)
                redislayer.reachability.worked()
                if failures:
                    log.info("worker %s: receiving nudges again", worker.name)
                failures = 0
                while True:
                    message = await layer.receive(channel)
                    worker.nudged(int(message.get("id", 0)))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop boundary: Redis down, a timeout, a malformed message
                failures += 1
                delay = min(backoff_delay(failures), NUDGE_RETRY_MAX_SECONDS)
                if isinstance(exc, redislayer.UNREACHABLE):  # a few lines per outage, not one a retry
                    redislayer.reachability.failed("nudge listen(s)", exc)
                    log.debug("worker %s: nudges stopped (%s); retrying in %.1f s", worker.name, exc, delay)
                else:
                    log.warning("worker %s: nudges stopped (%s); retrying in %.1f s", worker.name, exc, delay)
                await asyncio.sleep(delay)
    finally:
        if channel:  # leave the group on the way out, so it does not fill with stopped workers
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await layer.group_discard(events.WORKERS, channel)
