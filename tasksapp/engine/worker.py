"""The Worker: holds leased tasks in memory, polls each when due, applies changes through services."""

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from tasksapp import services
from tasksapp.engine import store
from tasksapp.engine.listener import ListenSupervisor
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay, poll_delay
from tasksapp.mcpclient import DetailedTask, McpClient, McpError, ProtocolError, TransportError
from tasksapp.models import RemoteTask
from tasksapp.services.common import DASHBOARD_INPUT_KINDS, describe
from tasksapp.services.tasks import snapshot_fingerprint

log = logging.getLogger(__name__)
LAG_SAMPLES = 100_000


def db[R](fn: Callable[..., R]) -> Callable[..., Any]:
    """Run a synchronous database step off the event loop (one shared thread keeps connections sane)."""
    return sync_to_async(fn, thread_sensitive=True)


@dataclass
class WorkerStats:
    polls: int = 0
    pushes: int = 0
    changes: int = 0
    errors: int = 0
    lags: deque[float] = field(default_factory=lambda: deque(maxlen=LAG_SAMPLES))  # the latest lags

    def record_lag(self, seconds: float) -> None:
        self.lags.append(seconds)


class Worker:
    def __init__(
        self,
        *,
        name: str | None = None,
        refresh_seconds: float = 1.0,
        heartbeat_seconds: float | None = None,
        max_in_flight: int = 256,
        listen: bool = True,
        transport_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.name = store.worker_name(name)
        self.refresh_seconds = refresh_seconds
        # Beat well inside the lease window that others use to judge whether this worker is alive.
        self.heartbeat_seconds = heartbeat_seconds or min(5.0, settings.MCP_LEASE_SECONDS / 3)
        self.listen = listen
        self.tasks: dict[int, TrackedTask] = {}
        self.servers: dict[int, ServerState] = {}
        self.listeners: dict[int, ListenSupervisor] = {}
        self.stats = WorkerStats()
        self._transport_factory = transport_factory
        self._queue: list[tuple[float, int, int]] = []
        self._seq = itertools.count()
        self.max_in_flight = max_in_flight
        self._in_flight: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._started: datetime = timezone.now()
        self._next_renew = 0.0

    # --- the steps ------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Sync servers, renew leases now and then, claim new tasks, and drop what is gone."""
        self._sync_servers(await db(store.enabled_servers)())
        if time.monotonic() >= self._next_renew:
            self._next_renew = time.monotonic() + settings.MCP_LEASE_SECONDS / 3
            held = await db(store.renew)(self.name)
            for pk in self.tasks.keys() - held:
                self.forget(pk)
            await self._shed_excess()
        while new := await db(store.claim)(self.name, len(self.tasks)):
            for task in await db(store.load_tasks)(new - self.tasks.keys()):
                self.track(task)
            if len(new) < store.CLAIM_BATCH:
                break
        self._update_listeners()

    async def _shed_excess(self) -> None:
        """Give back tasks beyond the fair share, so a worker started later gets its part."""
        excess = len(self.tasks) - await db(store.fair_share)(self.name)
        if excess <= 0:
            return
        spare = sorted((t for t in self.tasks.values() if not t.in_flight), key=lambda t: -t.due)[:excess]
        for task in spare:
            self.forget(task.pk)
        await db(store.release)(self.name, [task.pk for task in spare])

    async def poll_due(self) -> int:
        """Start a poll for every task whose time has come; returns how many were started."""
        now = time.monotonic()
        started = 0
        while self._queue and self._queue[0][0] <= now and len(self._in_flight) < self.max_in_flight:
            due, _, pk = heapq.heappop(self._queue)
            task = self.tasks.get(pk)
            if task is None or task.due != due or task.in_flight:
                continue
            server = self.servers.get(task.server_id)
            if server is None:
                continue
            if server.backing_off(now):
                self.schedule(task, server.backoff_until - now + random.uniform(0, 1))
                continue
            task.in_flight = True
            poll = asyncio.create_task(self._poll(task, server, due))
            self._in_flight.add(poll)
            poll.add_done_callback(self._in_flight.discard)
            started += 1
        return started

    async def drain(self) -> None:
        """Wait for every poll in flight (used by --once and by tests)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def beat(self) -> None:
        streams = sum(1 for listener in self.listeners.values() if listener.connected)
        await db(store.heartbeat)(
            self.name,
            started=self._started,
            held=len(self.tasks),
            polls=self.stats.polls,
            pushes=self.stats.pushes,
            streams=streams,
        )

    async def run(self, *, duration: float | None = None, once: bool = False) -> None:
        deadline = time.monotonic() + duration if duration is not None else None
        await self.beat()
        await self.refresh()
        if once:
            await self.poll_due()
            await self.drain()
            await self.shutdown()
            return
        chores = [asyncio.create_task(self._follow_nudges()), asyncio.create_task(self._housekeeping())]
        try:
            while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
                await self.poll_due()
                now = time.monotonic()
                wake_at = self._queue[0][0] if self._queue else now + 1
                if deadline is not None:
                    wake_at = min(wake_at, deadline)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(0.0, wake_at - time.monotonic()))
        finally:
            for chore in chores:
                chore.cancel()
            await asyncio.gather(*chores, return_exceptions=True)
            await self.shutdown()

    async def _housekeeping(self) -> None:
        """Leases, heartbeats and stuck answers, beside the poll loop: a slow database statement
        (renewing 10,000 leases) must never hold back a poll that is due."""
        next_beat = next_refresh = 0.0
        while True:
            now = time.monotonic()
            try:
                if now >= next_beat:
                    next_beat = now + self.heartbeat_seconds
                    await self.beat()
                    await db(services.input_resend_stuck)(older_than_seconds=60)
                if now >= next_refresh:
                    next_refresh = now + self.refresh_seconds
                    await self.refresh()
            except Exception:  # the loop boundary: a database hiccup must not stop the worker
                log.exception("worker %s: housekeeping failed; retrying", self.name)
            await asyncio.sleep(max(0.05, min(next_beat, next_refresh) - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    async def shutdown(self) -> None:
        for listener in self.listeners.values():
            await listener.close()
        for poll in list(self._in_flight):
            poll.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        for server in self.servers.values():
            await server.client.aclose()
        await db(store.release)(self.name)
        await db(store.heartbeat_stop)(self.name)

    # --- tracking -------------------------------------------------------------------------

    def track(self, task: TrackedTask) -> None:
        server = self.servers.get(task.server_id)
        if server is None:
            return
        self.tasks[task.pk] = task
        server.remote_to_pk[task.remote_id] = task.pk
        # Spread freshly claimed tasks over a short window rather than one burst of N polls.
        self.schedule(task, random.uniform(0, min(poll_delay(task.poll_interval_ms, covered=False), 5.0)))

    def forget(self, pk: int) -> None:
        task = self.tasks.pop(pk, None)
        if task is not None and (server := self.servers.get(task.server_id)):
            server.remote_to_pk.pop(task.remote_id, None)

    def schedule(self, task: TrackedTask, delay: float) -> None:
        task.due = time.monotonic() + delay
        sooner = not self._queue or task.due < self._queue[0][0]
        heapq.heappush(self._queue, (task.due, next(self._seq), task.pk))
        if sooner:
            self._wake.set()  # the loop sleeps until the earliest due time it knew of

    async def apply(self, task: TrackedTask, snapshot: DetailedTask, source: str) -> None:
        """Write a snapshot through the service only when its fingerprint moved; never per poll."""
        current = snapshot_fingerprint(snapshot)
        if current != task.fingerprint:
            changed = await db(_apply_snapshot)(task.pk, snapshot, source)
            task.fingerprint = current
            self.stats.changes += int(changed)
            if snapshot.ttl_ms is not None and snapshot.created_at:
                task.ttl_deadline = _deadline(snapshot)
        task.poll_interval_ms = snapshot.poll_interval_ms
        task.errors = 0
        if snapshot.is_terminal:
            self.forget(task.pk)
            await db(store.release)(self.name, [task.pk])
        elif source == "poll":
            self.schedule(task, self.next_delay(task))

    def next_delay(self, task: TrackedTask) -> float:
        """The server's interval (a slow safety net under a healthy stream), but never past the TTL:
        a task is looked at again just after its TTL, to see whether the server has dropped it."""
        delay = poll_delay(task.poll_interval_ms, covered=task.pushed)
        if task.ttl_deadline is not None:
            left = task.ttl_deadline - time.time()
            if left > 0:
                delay = min(delay, left + 0.1)
        return delay

    # --- one poll -------------------------------------------------------------------------

    async def _poll(self, task: TrackedTask, server: ServerState, due: float) -> None:
        self.stats.record_lag(time.monotonic() - due)
        try:
            snapshot = await server.client.get_task(task.remote_id)
            self.stats.polls += 1
            await self._server_ok(server)
            await self.apply(task, snapshot, "poll")
        except ProtocolError as exc:
            await self._task_failed(task, exc)
        except TransportError as exc:
            await self._server_failed(server, task, exc)
        except McpError as exc:
            await self._task_failed(task, exc)
        except Exception:  # the loop boundary: log with the task and server, keep going
            log.exception("polling task #%s on %s failed", task.pk, server.name)
            self.stats.errors += 1
            self.schedule(task, backoff_delay(task.errors + 1))
        finally:
            task.in_flight = False
            if len(self._in_flight) >= self.max_in_flight:
                self._wake.set()  # a slot frees up for polls that are already due

    async def _task_failed(self, task: TrackedTask, exc: McpError) -> None:
        self.stats.errors += 1
        if isinstance(exc, ProtocolError) and exc.is_not_found:
            await db(_expire)(task.pk, "the server no longer knows this task (-32602)")
            self.forget(task.pk)
            return
        task.errors += 1
        await db(_record_error)(task.pk, describe(exc))
        self.schedule(task, backoff_delay(task.errors))

    async def _server_failed(self, server: ServerState, task: TrackedTask, exc: TransportError) -> None:
        self.stats.errors += 1
        now = time.monotonic()
        if not server.backing_off(now):
            server.failures += 1
            delay = backoff_delay(server.failures, exc.retry_after)
            server.backoff_until = now + delay
            log.warning("server %s failing (%s); backing off %.1f s", server.name, exc, delay)
            until = timezone.now() + timedelta(seconds=delay)
            await db(services.server_record_failure)(
                server_id=server.server_id, error=str(exc), failures=server.failures, backoff_until=until
            )
        grace = settings.MCP_TTL_GRACE_MS / 1000
        if task.ttl_deadline is not None and time.time() > task.ttl_deadline + grace:
            await db(_expire)(task.pk, "its TTL passed while the server was unreachable")
            self.forget(task.pk)
            return
        self.schedule(task, server.backoff_until - now + random.uniform(0, 1))

    async def _server_ok(self, server: ServerState) -> None:
        now = time.monotonic()
        if server.failures or now - server.last_success_recorded > 30:
            if server.failures:
                log.info("server %s recovered after %d failures", server.name, server.failures)
            server.failures, server.backoff_until, server.last_success_recorded = 0, 0.0, now
            await db(services.server_record_success)(server_id=server.server_id, now=timezone.now())

    # --- servers, listeners and nudges ----------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        job = asyncio.create_task(coroutine)
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    def _sync_servers(self, rows: dict[int, store.ServerRow]) -> None:
        for pk in self.servers.keys() - rows.keys():
            self._drop_server(pk)
        for pk, row in rows.items():
            current = self.servers.get(pk)
            if current is not None and current.signature == row.signature:
                current.listen_wanted = row.listen_wanted and self.listen
                continue
            if current is not None:
                self._drop_server(pk)
            self.servers[pk] = ServerState(
                server_id=pk,
                name=row.name,
                client=self._client(row),
                signature=row.signature,
                listen_wanted=row.listen_wanted and self.listen,
            )

    def _drop_server(self, pk: int) -> None:
        state = self.servers.pop(pk)
        if listener := self.listeners.pop(pk, None):
            self._spawn(listener.close())
        self._spawn(state.client.aclose())
        for task_pk in [t.pk for t in self.tasks.values() if t.server_id == pk]:
            self.tasks.pop(task_pk)

    def _client(self, row: store.ServerRow) -> McpClient:
        era = row.era if row.era in ("modern", "legacy") else None
        transport = self._transport_factory() if self._transport_factory else None
        agent = {"User-Agent": f"mcp-tasks-dashboard/0.1 worker/{self.name}"}
        return McpClient(
            row.url,
            headers={**agent, **row.headers},
            input_kinds=DASHBOARD_INPUT_KINDS,
            era=era,  # type: ignore[arg-type]
            max_body_bytes=settings.MCP_MAX_BODY_BYTES,
            transport=transport,
            block_private_addresses=settings.MCP_BLOCK_PRIVATE_ADDRESSES,
        )

    def _update_listeners(self) -> None:
        for pk, server in self.servers.items():
            if not server.listen_wanted:
                if listener := self.listeners.pop(pk, None):
                    self._spawn(listener.close())
                continue
            listener = self.listeners.get(pk)
            if listener is None:
                listener = self.listeners[pk] = ListenSupervisor(self, server)
            listener.want(set(server.remote_to_pk))

    async def _follow_nudges(self) -> None:
        """Poll at once what an operator just answered or cancelled (needs a shared channel layer)."""
        from channels.layers import get_channel_layer

        from tasksapp import events

        layer = get_channel_layer()
        if layer is None:
            return
        channel = await layer.new_channel()
        await layer.group_add(events.WORKERS, channel)
        while True:
            message = await layer.receive(channel)
            task = self.tasks.get(int(message.get("id", 0)))
            if task is not None and not task.in_flight:
                self.schedule(task, 0.0)
            elif task is None:
                self._next_renew = 0.0
                self._wake.set()


def _apply_snapshot(pk: int, snapshot: DetailedTask, source: str) -> bool:
    # The service re-reads the row under a lock; an unsaved instance carrying the pk is enough.
    return services.task_apply_snapshot(task=RemoteTask(pk=pk), snapshot=snapshot, source=source)


def _expire(pk: int, reason: str) -> None:
    services.task_mark_expired(task=RemoteTask(pk=pk), reason=reason)


def _record_error(pk: int, error: str) -> None:
    services.task_record_error(task=RemoteTask(pk=pk), error=error)


def _deadline(snapshot: DetailedTask) -> float | None:
    try:
        created = datetime.fromisoformat(snapshot.created_at)
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created.timestamp() + (snapshot.ttl_ms or 0) / 1000
