"""The servers one worker watches: a client and at most one listen stream each, rebuilt when a
server's row changes, and this worker's record of each server's health (back-off, probes).

The pool knows servers only; what follows for the tasks on them is the worker's, told by what
`sync` returns.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from tasksapp import services
from tasksapp.engine import store
from tasksapp.engine.listener import ListenSupervisor, TaskBoard
from tasksapp.engine.stats import WorkerStats
from tasksapp.engine.store import db
from tasksapp.engine.tracking import ServerState, backoff_delay
from tasksapp.mcpclient import McpClient, McpError, TransportError
from tasksapp.services import health
from tasksapp.services.oauth import worker_auth
from tasksapp.services.remote import client_for

log = logging.getLogger(__name__)
SUCCESS_EVERY_SECONDS = health.SUCCESS_REFRESH.total_seconds()
SUCCESS_EVERY_SECONDS_FAILING = health.SUCCESS_REFRESH_FAILING.total_seconds()


@dataclass
class ServerChanges:
    """What one `sync` changed that concerns the tasks on those servers."""

    dropped: list[int] = field(default_factory=list)  # disabled or deleted: stop watching their tasks
    renewed: list[int] = field(default_factory=list)  # a new client (an edit): ask their tasks at once
    # Back-off ended at another worker's newer answer: (server, that answer's time).
    yielded: list[tuple[ServerState, datetime]] = field(default_factory=list)


class ServerPool:
    def __init__(
        self,
        *,
        worker: str,
        board: TaskBoard,
        stats: WorkerStats,
        listen: bool,
        transport_factory: Callable[[], Any] | None,
    ) -> None:
        self.worker = worker
        self.servers: dict[int, ServerState] = {}
        self._board = board
        self._stats = stats
        self._listen = listen
        self._transport_factory = transport_factory
        self._listeners: dict[int, ListenSupervisor] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def get(self, pk: int) -> ServerState | None:
        return self.servers.get(pk)

    def sync(self, rows: dict[int, store.ServerRow]) -> ServerChanges:
        """Match the watched servers to `rows` (store.enabled_servers): a server gone is retired,
        an edited one (URL, credentials, era, timeouts) gets a new client, keeping its tasks."""
        changes = ServerChanges()
        for pk in self.servers.keys() - rows.keys():
            self._retire(pk)
            changes.dropped.append(pk)
        for pk, row in rows.items():
            current = self.servers.get(pk)
            if current is not None and current.signature == row.signature:
                current.listen_wanted = row.listen_wanted and self._listen
                current.recorded_failing, current.others_failing = row.failing, row.others_failing
                answered = row.others_success_at
                if answered is not None and _yields_to_others(current, answered):
                    changes.yielded.append((current, answered))
                continue
            state = ServerState(
                server_id=pk,
                name=row.name,
                client=self._client(row),
                signature=row.signature,
                listen_wanted=row.listen_wanted and self._listen,
                recorded_failing=row.failing,
                others_failing=row.others_failing,
            )
            if current is not None:
                state.remote_to_pk = current.remote_to_pk
                self._retire(pk)
                changes.renewed.append(pk)
            self.servers[pk] = state
        return changes

    def update_listeners(self) -> None:
        """One listen stream for each server that wants one, covering the tasks held there."""
        for pk, server in self.servers.items():
            if not server.listen_wanted:
                if listener := self._listeners.pop(pk, None):
                    self._spawn(listener.close())
                continue
            listener = self._listeners.get(pk)
            if listener is None:
                listener = self._listeners[pk] = ListenSupervisor(self._board, server)
            listener.want(set(server.remote_to_pk))

    def streams_connected(self) -> int:
        return sum(1 for listener in self._listeners.values() if listener.connected)

    def probe_idle(self) -> None:
        """A server recorded as failing that has no task to poll is probed (server/discover) at the
        pace of its back-off, so its health turns back to healthy once it is back."""
        now = time.monotonic()
        for server in self.servers.values():
            idle = not server.remote_to_pk and not server.probing
            if server.recorded_failing and idle and not server.backing_off(now):
                server.probing = True
                self._spawn(self._probe(server))

    async def record_failure(self, server: ServerState, exc: TransportError) -> None:
        """The server could not be reached (or answered wrongly): back off, and record the failure
        once per back-off."""
        self._stats.errors += 1
        now = time.monotonic()
        if server.backing_off(now):
            return
        server.failures += 1
        delay = backoff_delay(server.failures, exc.retry_after)
        server.backoff_until = now + delay
        log.warning("server %s failing (%s); backing off %.1f s", server.name, exc, delay)
        server.failed_at = timezone.now()
        until = server.failed_at + timedelta(seconds=delay)
        await db(services.server_record_failure)(
            server_id=server.server_id,
            worker=self.worker,
            error=str(exc),
            failures=server.failures,
            backoff_until=until,
        )

    async def record_answer(self, server: ServerState) -> None:
        """Record an answer: at once after failures, else now and then (more often while the server
        fails for another worker, whose back-off yields to this fresh answer)."""
        now = time.monotonic()
        every = SUCCESS_EVERY_SECONDS_FAILING if server.others_failing else SUCCESS_EVERY_SECONDS
        if server.failures or now - server.last_success_recorded > every:
            if server.failures:
                log.info("server %s recovered after %d failures", server.name, server.failures)
            server.failures, server.backoff_until, server.last_success_recorded = 0, 0.0, now
            await db(services.server_record_success)(
                server_id=server.server_id, worker=self.worker, now=timezone.now()
            )

    async def close_listeners(self) -> None:
        for listener in self._listeners.values():
            await listener.close()

    async def close_clients(self) -> None:
        for server in self.servers.values():
            await server.client.aclose()

    def _retire(self, pk: int) -> None:
        """Close a server's listener and client; the client once the polls using it have ended."""
        state = self.servers.pop(pk)
        if listener := self._listeners.pop(pk, None):
            self._spawn(listener.close())
        self._spawn(_close_when_idle(state))

    def _client(self, row: store.ServerRow) -> McpClient:
        return client_for(
            row,
            worker_auth(row.pk, row.url, row.oauth) if row.oauth else None,
            user_agent=f"mcp-tasks-dashboard/0.1 worker/{self.worker}",
            transport=self._transport_factory() if self._transport_factory else None,
        )

    async def _probe(self, server: ServerState) -> None:
        try:
            await server.client.discover()
        except TransportError as exc:
            await self.record_failure(server, exc)
        except McpError:
            await self.record_answer(server)  # an error answer is an answer: the server is reachable
        else:
            await self.record_answer(server)
        finally:
            server.probing = False

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        job = asyncio.create_task(coroutine)
        self._background.add(job)
        job.add_done_callback(self._background.discard)


def _yields_to_others(state: ServerState, answered_at: datetime) -> bool:
    """Another worker got an answer from this server after this worker's back-off began: the
    back-off ends now (True), once per such answer. If the server fails this worker again, its
    back-off resumes, longer.

    Back-off lives in each worker's memory; without this a worker that failed during a flap kept
    waiting out a long back-off (minutes) while the server answered everyone else."""
    if state.failed_at is None or not state.backing_off():
        return False
    if answered_at <= state.failed_at or answered_at == state.yielded_to:
        return False
    state.yielded_to, state.backoff_until = answered_at, 0.0
    return True


async def _close_when_idle(state: ServerState) -> None:
    try:
        if state.polls_in_flight:
            await state.idle.wait()
    finally:
        await state.client.aclose()
