"""The Worker: holds leased tasks in memory, polls each when due, applies changes through services.

It owns the tasks and their schedule; the servers they live on are a ServerPool's (engine.servers),
which hands each listen stream this worker as its TaskBoard (engine.listener).
"""

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import SyncToAsync
from django.conf import settings
from django.utils import timezone

from tasksapp import services
from tasksapp.connections import CANNOT_WRITE, resilient
from tasksapp.engine import store
from tasksapp.engine.health import ScheduleHealth
from tasksapp.engine.listener import Pushed
from tasksapp.engine.nudges import follow_nudges
from tasksapp.engine.servers import ServerChanges, ServerPool
from tasksapp.engine.stats import WorkerStats
from tasksapp.engine.store import db
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay, poll_delay
from tasksapp.mcpclient import (
    DetailedTask,
    InvalidResponse,
    McpError,
    ProtocolError,
    TransportError,
)
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.models import RemoteTask
from tasksapp.retention import chores as retention_chores
from tasksapp.services.errors import describe
from tasksapp.services.tasks import snapshot_fingerprint

log = logging.getLogger(__name__)
# A server change older than this at commit, or newer by more than the tolerance, says the server's
# clock is off (or the change is a catch-up after an outage): it is left out of the mirror lag.
MIRROR_LAG_MAX_SECONDS = 600.0
CLOCK_TOLERANCE_SECONDS = 1.0
DB_BACKOFF_MAX_SECONDS = 5.0
AUTHORIZATION_WAIT_SECONDS = 60.0  # a task whose server needs a person to reconnect looks again this often
# The poll loop wakes at most this often for polls that are not yet due: polls due within one step
# start together (a loop turn per due time cost a few microseconds a poll at 10,000 tasks, for lag
# of a fraction of a millisecond). A wake-up (a nudge, a task due at once) is never delayed by it.
WAKE_STEP_SECONDS = 0.005
GATEWAY_STAMP_SECONDS = 0.1
PURGE_CHECK_SECONDS = 60.0


class Worker:
    """One worker process's engine. Tests drive it a step at a time (refresh, poll_due, drain, beat);
    `run` loops over those steps. To its listen streams it is a TaskBoard (engine.listener)."""

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
        self.heartbeat_seconds = heartbeat_seconds or store.heartbeat_seconds()
        self.tasks: dict[int, TrackedTask] = {}
        self.stats = WorkerStats()
        self.pool = ServerPool(
            worker=self.name, board=self, stats=self.stats, listen=listen, transport_factory=transport_factory
        )
        self.health = ScheduleHealth(threshold_ms=settings.MCP_WORKER_LAG_P99_MS)
        self._queue: list[tuple[float, int, int]] = []
        self._seq = itertools.count()
        self.max_in_flight = max_in_flight
        self._in_flight: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._started: datetime = timezone.now()
        self._next_renew = 0.0
        # Until when (monotonic) every lease this worker holds is surely its own: measured from before
        # the claim or renewal that set it, so the database's lease_until is never earlier. Past it,
        # another worker may have taken the tasks, and none is polled until a renewal says which stay.
        self._leases_until = 0.0
        self._adopted = False
        self._db_failures = 0
        self._db_backoff_until = 0.0  # monotonic: the mirror cannot be written, so polls wait
        # Polled or pushed since the last heartbeat: when the server last vouched for each task.
        self._confirmed: dict[int, datetime] = {}
        self._polled: dict[int, datetime] = {}  # gateway tasks confirmed since the last stamp: when
        # The heartbeat has a database thread (and connection) of its own: on the shared one it
        # queued behind every poll's step, and after a database outage under load the backlog held
        # it past the lease, so /healthz and the overview said "workers alive: 0" for a few seconds.
        self._beat_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")

    # --- the steps ------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Sync servers, renew leases now and then, claim new tasks, and drop what is gone."""
        self._follow_servers(self.pool.sync(await db(store.enabled_servers)(self.name)))
        span = settings.MCP_LEASE_SECONDS
        if not self._adopted:
            # A process restarted under the same --name takes over what its predecessor held at once.
            began = time.monotonic()
            self._track_all(await db(store.load_tasks)(await db(store.adopt)(self.name)))
            self._leases_until = began + span
            self._adopted = True
        if time.monotonic() >= self._next_renew:
            began = time.monotonic()
            self._next_renew = began + span / 3
            held = await db(store.renew)(self.name, set(self.tasks))
            for pk in self.tasks.keys() - held:
                self.forget(pk)
            self._leases_until = began + span
            await self._shed_excess()
        began = time.monotonic()
        while new := await db(store.claim)(self.name, len(self.tasks)):
            if not self.tasks:  # only new leases held: they are good from this claim on
                self._leases_until = began + span
            self._track_all(await db(store.load_tasks)(new - self.tasks.keys()))
            if len(new) < store.CLAIM_BATCH:
                break
        self._database_ok()
        self.pool.update_listeners()

    def _follow_servers(self, changes: ServerChanges) -> None:
        """What the servers' changes mean for the tasks on them."""
        for pk in changes.dropped:
            self._drop_tasks_on(pk)
        for pk in changes.renewed:
            # The same tasks, asked through the new client at once (dropped, their leases stayed
            # held and unrenewed, so nobody polled them until the leases lapsed).
            for task in self._idle_tasks_on(pk):
                self.schedule(task, 0.0)
        for server, answered_at in changes.yielded:
            self._retry_after_yield(server, answered_at)

    def _idle_tasks_on(self, server_id: int) -> list[TrackedTask]:
        return [t for t in self.tasks.values() if t.server_id == server_id and not t.in_flight]

    def _drop_tasks_on(self, server_id: int) -> None:
        """The server was disabled or deleted: stop watching its tasks and give their leases back,
        so that they are claimed again at once if it is enabled again."""
        dropped = [t.pk for t in self.tasks.values() if t.server_id == server_id]
        for pk in dropped:
            self.tasks.pop(pk)
        if dropped:
            self._spawn(self._release(dropped))

    def _retry_after_yield(self, server: ServerState, answered_at: datetime) -> None:
        """The server's back-off ended at another worker's answer: its tasks are polled again,
        spread as a takeover is."""
        tasks = self._idle_tasks_on(server.server_id)
        log.info(
            "worker %s: %s answered another worker at %s, after this worker's back-off began; "
            "retrying %d task(s) now",
            self.name,
            server.name,
            answered_at.isoformat(timespec="seconds"),
            len(tasks),
        )
        window = max(1.0, min(5.0, len(tasks) / 100))
        for task in tasks:
            self.schedule(task, random.uniform(0, window))

    async def _release(self, ids: list[int]) -> None:
        try:
            await db(store.release)(self.name, ids)
        except Exception as exc:  # the leases lapse by themselves; nothing is lost by waiting for that
            log.warning("worker %s: could not give back %d leases (%s)", self.name, len(ids), exc)

    def _track_all(self, tasks: list[TrackedTask]) -> None:
        # Spread a large batch (a takeover, a restart) over up to 5 s rather than one burst of polls;
        # a few new tasks are polled at once.
        window = min(5.0, len(tasks) / 100)
        for task in tasks:
            self.track(task, window)

    async def _shed_excess(self) -> None:
        """Give back tasks beyond the fair share, so a worker started later gets its part."""
        excess = len(self.tasks) - await db(store.fair_share)(self.name) - store.SHARE_SLACK
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
            server = self.pool.get(task.server_id)
            if server is None:
                continue
            if self._leases_lapsing(now, task):
                continue
            if server.backing_off(now) or self._db_backoff_until > now:
                until = max(server.backoff_until, self._db_backoff_until)
                self.schedule(task, until - now + random.uniform(0, 1))
                continue
            task.in_flight = True
            server.poll_started()
            poll = asyncio.create_task(self._poll(task, server, due))
            self._in_flight.add(poll)
            poll.add_done_callback(self._in_flight.discard)
            started += 1
        return started

    def _leases_lapsing(self, now: float, task: TrackedTask) -> bool:
        """True if this worker's leases may have lapsed (a starved or frozen process renews late):
        the task is polled after a renewal says it is still ours, never before."""
        if now <= self._leases_until - settings.MCP_LEASE_SECONDS / 5:
            return False
        self._next_renew = 0.0
        self._wake.set()
        self.schedule(task, 0.5)
        return True

    async def drain(self) -> None:
        """Wait for every poll in flight (used by --once and by tests)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def beat(self) -> None:
        streams = self.pool.streams_connected()
        await self._on_beat_thread(store.heartbeat)(
            self.name,
            started=self._started,
            held=len(self.tasks),
            polls=self.stats.polls,
            pushes=self.stats.pushes,
            streams=streams,
            errors=self.stats.errors,
            lag_ms=self.stats.take_lag_ms(),
            mirror_ms=self.stats.take_mirror_ms(),
            push_ms=self.stats.take_push_ms(),
            by_path=dict(self.stats.by_path),
        )
        if self.health.verdict(self.name, timezone.now()):
            await self._on_beat_thread(store.heartbeat_health)(
                self.name, behind_since=self.health.behind_since, note=self.health.note
            )

    def _on_beat_thread[**P, R](self, fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        step: Callable[P, Awaitable[R]] = SyncToAsync(
            resilient(fn), thread_sensitive=False, executor=self._beat_thread
        )
        return step

    async def run(self, *, duration: float | None = None, once: bool = False) -> None:
        deadline = time.monotonic() + duration if duration is not None else None
        try:
            await self.beat()
            await self.refresh()
        except CANNOT_WRITE as exc:
            if once:
                raise
            # Started while the database is away (a restart, a failover): housekeeping keeps trying.
            log.warning("worker %s: database unavailable at start (%s); retrying", self.name, exc)
        if once:
            await self.poll_due()
            await self.drain()
            await self.shutdown()
            return
        jobs = [
            asyncio.create_task(follow_nudges(self.name, self.nudged)),
            asyncio.create_task(self._housekeeping()),
            asyncio.create_task(self._beating()),
            asyncio.create_task(self._purging()),
            asyncio.create_task(self._stamp_gateway_tasks()),
        ]
        try:
            while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
                await self.poll_due()
                now = time.monotonic()
                wake_at = max(self._queue[0][0], now + WAKE_STEP_SECONDS) if self._queue else now + 1
                if deadline is not None:
                    wake_at = min(wake_at, deadline)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(0.0, wake_at - time.monotonic()))
        finally:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            await self.shutdown()

    async def _housekeeping(self) -> None:
        """Leases, stuck answers and probes, beside the poll loop: a slow database statement
        (renewing 10,000 leases) must never hold back a poll that is due."""
        next_beat = next_refresh = 0.0
        while True:
            now = time.monotonic()
            try:
                if now >= next_beat:
                    next_beat = now + self.heartbeat_seconds
                    await self.flush_confirmed()
                    await db(services.input_resend_stuck)(older_than_seconds=60)
                    await db(services.pending_calls_expire)()
                    await db(services.input_prune_gone)(
                        older_than_seconds=settings.MCP_INPUT_GONE_KEEP_SECONDS
                    )
                if now >= next_refresh:
                    next_refresh = now + self.refresh_seconds
                    await self.refresh()
                    self.pool.probe_idle()
            except CANNOT_WRITE as exc:  # a database restart: say so once a second, keep trying
                log.warning("worker %s: database unreachable (%s); retrying", self.name, exc)
            except Exception:  # the loop boundary: a database hiccup must not stop the worker
                log.exception("worker %s: housekeeping failed; retrying", self.name)
            await asyncio.sleep(max(0.05, min(next_beat, next_refresh) - time.monotonic()))

    async def _beating(self) -> None:
        """A heartbeat every heartbeat_seconds, apart from housekeeping (whose steps wait for the
        shared database thread); one that failed (the database away) is tried again within a
        second, so the first write that works says the worker is alive."""
        while True:
            pause = self.heartbeat_seconds
            try:
                await self.beat()
            except CANNOT_WRITE as exc:
                log.warning("worker %s: could not write its heartbeat (%s); retrying", self.name, exc)
                pause = min(1.0, pause)
            except Exception:  # the loop boundary: the beat must outlive any one failure
                log.exception("worker %s: heartbeat failed; retrying", self.name)
                pause = min(1.0, pause)
            await asyncio.sleep(pause)

    async def _purging(self) -> None:
        """The daily purge (tasksapp.retention), asked for every minute: the worker that claims its
        Chore row runs it, on a thread of its own in short batches, so polls carry on meanwhile."""
        step = SyncToAsync(resilient(retention_chores.purge_if_due), thread_sensitive=False)
        while True:
            try:
                await step(self.name)
            except CANNOT_WRITE as exc:
                log.warning("worker %s: purge could not run (%s); trying again later", self.name, exc)
            except Exception:  # the loop boundary: a failed purge must not stop the worker
                log.exception("worker %s: purge failed; trying again later", self.name)
            await asyncio.sleep(PURGE_CHECK_SECONDS)

    async def _stamp_gateway_tasks(self) -> None:
        """Every tenth of a second: when the server last confirmed the gateway tasks polled since."""
        while True:
            await asyncio.sleep(GATEWAY_STAMP_SECONDS)
            await self.flush_polled()

    async def flush_polled(self) -> None:
        polled, self._polled = self._polled, {}
        if polled:
            try:
                await db(store.stamp_polled)(polled)
            except CANNOT_WRITE as exc:
                log.warning("worker %s: could not stamp gateway tasks (%s)", self.name, exc)

    async def flush_confirmed(self) -> None:
        """Write when the tasks polled or pushed since the last flush were last confirmed: the time
        of the server's answer (to the second), not of the flush."""
        confirmed, self._confirmed = self._confirmed, {}
        if confirmed:
            try:
                await db(store.confirm)(confirmed)
            except BaseException:
                self._confirmed = confirmed | self._confirmed  # try again at the next beat
                raise

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    async def shutdown(self) -> None:
        await self.pool.close_listeners()
        for poll in list(self._in_flight):
            poll.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        await self.pool.close_clients()
        await self.flush_confirmed()
        await self.flush_polled()
        await db(store.release)(self.name)
        await db(store.heartbeat_stop)(self.name)
        await self._on_beat_thread(_close_connections)()
        self._beat_thread.shutdown(wait=False)

    # --- tracking -------------------------------------------------------------------------

    def track(self, task: TrackedTask, window: float = 0.0) -> None:
        server = self.pool.get(task.server_id)
        if server is None:
            return
        self.tasks[task.pk] = task
        server.remote_to_pk[task.remote_id] = task.pk
        self.schedule(task, random.uniform(0, min(poll_delay(task.poll_interval_ms, covered=False), window)))

    def forget(self, pk: int) -> None:
        task = self.tasks.pop(pk, None)
        if task is not None and (server := self.pool.get(task.server_id)):
            server.remote_to_pk.pop(task.remote_id, None)

    def tracked(self, pk: int) -> TrackedTask | None:
        return self.tasks.get(pk)

    def count_push(self) -> None:
        self.stats.pushes += 1

    def schedule(self, task: TrackedTask, delay: float) -> None:
        task.due = time.monotonic() + delay
        sooner = not self._queue or task.due < self._queue[0][0]
        heapq.heappush(self._queue, (task.due, next(self._seq), task.pk))
        if sooner:
            self._wake.set()  # the loop sleeps until the earliest due time it knew of

    async def apply(
        self, task: TrackedTask, snapshot: DetailedTask, source: str, received: float | None = None
    ) -> None:
        """Write a snapshot through the service only when its fingerprint moved; never per poll.
        `received` (monotonic) is when a pushed snapshot arrived: push -> commit is measured from it."""
        await self.apply_many([(task, snapshot, received)], source)

    async def apply_many(self, items: list[Pushed], source: str) -> None:
        """`apply` for several snapshots (of different tasks), written in one database step: the
        listener writes what arrived while the previous step ran together (one trip to the database
        thread, not one a change)."""
        moved = [(t, snap, recv) for t, snap, recv in items if snapshot_fingerprint(snap) != t.fingerprint]
        if moved:
            results = await db(_apply_snapshots)([(t.pk, snap) for t, snap, _ in moved], source)
            committed = time.monotonic()
            for (task, snapshot, received), changed in zip(moved, results, strict=True):
                path = "push" if source == "push" else "safety_net" if task.pushed else "poll"
                task.fingerprint = snapshot_fingerprint(snapshot)
                self.stats.changes += int(changed)
                if changed:
                    push_lag = committed - received if received is not None else None
                    self.stats.record_change(path, server_lag=_server_lag(snapshot), push_lag=push_lag)
                if snapshot.ttl_ms is not None and snapshot.created_at:
                    task.ttl_deadline = _deadline(snapshot)
        answered = timezone.now()
        ended: list[int] = []
        for task, snapshot, _ in items:
            task.poll_interval_ms = snapshot.poll_interval_ms
            task.errors = 0
            self._confirmed[task.pk] = answered
            if task.gateway:
                self._polled[task.pk] = answered
            if snapshot.is_terminal:
                self.forget(task.pk)
                ended.append(task.pk)
            elif source == "poll":
                self.schedule(task, self.next_delay(task))
        if ended:
            await db(store.release)(self.name, ended)

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
        lag = time.monotonic() - due
        self.stats.record_lag(lag)
        self.health.observe(lag)
        try:
            # Checked again as the poll runs: a process frozen between starting a poll and sending it
            # (SIGSTOP, a paused VM) must not send it once another worker may hold the task.
            if not self._leases_lapsing(time.monotonic(), task):
                await self._poll_once(task, server)
        except CANNOT_WRITE as exc:
            self._database_failed(task, exc)
        except Exception:  # the loop boundary: log with the task and server, keep going
            log.exception("polling task #%s on %s failed", task.pk, server.name)
            self.stats.errors += 1
            task.errors += 1
            self.schedule(task, backoff_delay(task.errors))
        finally:
            task.in_flight = False
            server.poll_ended()
            if task.nudged:
                # An answer or a cancel arrived while this poll was on the wire: its answer may
                # predate them, so look again now rather than at the server's next interval.
                task.nudged = False
                if self.tasks.get(task.pk) is task:
                    self.schedule(task, 0.0)
            if len(self._in_flight) >= self.max_in_flight:
                self._wake.set()  # a slot frees up for polls that are already due

    async def _poll_once(self, task: TrackedTask, server: ServerState) -> None:
        """One tasks/get and what follows from it; every outcome reschedules or forgets the task."""
        try:
            snapshot = await server.client.get_task(task.remote_id)
        except ProtocolError as exc:
            await self.pool.record_answer(server)  # it answered: reachable, whatever it thinks of the task
            await self._task_failed(task, exc)
            return
        except TransportError as exc:
            await self._server_failed(server, exc, task)
            return
        except AuthorizationRequired as exc:
            # A person must reconnect: the task is kept (never expired for this) and waits; a
            # reconnect changes the server's row, and the new client polls it at once.
            self.stats.errors += 1
            await db(services.oauth_mark_needed)(server_id=server.server_id, exc=exc)
            self.schedule(task, AUTHORIZATION_WAIT_SECONDS)
            return
        except McpError as exc:
            await self._task_failed(task, exc)
            return
        self.stats.polls += 1
        await self.pool.record_answer(server)
        await self.apply(task, snapshot, "poll")

    def _database_failed(self, task: TrackedTask, exc: Exception) -> None:
        """The mirror cannot be written: every poll waits (capped back-off) instead of re-polling."""
        self.stats.errors += 1
        now = time.monotonic()
        if self._db_backoff_until <= now:
            self._db_failures += 1
            delay = min(backoff_delay(self._db_failures), DB_BACKOFF_MAX_SECONDS)
            self._db_backoff_until = now + delay
            log.warning("worker %s: database unreachable (%s); polls wait %.1f s", self.name, exc, delay)
        self.schedule(task, self._db_backoff_until - now + random.uniform(0, 1))

    def _database_ok(self) -> None:
        if self._db_failures:
            log.info("worker %s: the database is back", self.name)
            self._db_failures, self._db_backoff_until = 0, 0.0

    async def _task_failed(self, task: TrackedTask, exc: McpError) -> None:
        self.stats.errors += 1
        if isinstance(exc, ProtocolError) and exc.is_not_found:
            await db(_expire)(task.pk, "the server no longer knows this task (-32602)")
            self.forget(task.pk)
            return
        task.errors += 1
        await db(_record_error)(task.pk, describe(exc))
        self.schedule(task, backoff_delay(task.errors))

    async def _server_failed(self, server: ServerState, exc: TransportError, task: TrackedTask) -> None:
        now = time.monotonic()
        await self.pool.record_failure(server, exc)
        grace = settings.MCP_TTL_GRACE_MS / 1000
        if task.ttl_deadline is not None and time.time() > task.ttl_deadline + grace:
            await db(_expire)(task.pk, f"its TTL passed while {_what_went_wrong(exc)}")
            self.forget(task.pk)
            return
        self.schedule(task, server.backoff_until - now + random.uniform(0, 1))

    # --- beside the poll loop -------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        job = asyncio.create_task(coroutine)
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    def nudged(self, pk: int) -> None:
        """An operator answered or cancelled task `pk`: poll it now, or claim it if it is not ours yet."""
        task = self.tasks.get(pk)
        if task is not None and task.in_flight:
            task.nudged = True
        elif task is not None:
            self.schedule(task, 0.0)
        else:
            self._next_renew = 0.0
            self._wake.set()


def _close_connections() -> None:
    from django.db import connections

    connections.close_all()


def _apply_snapshots(items: list[tuple[int, DetailedTask]], source: str) -> list[bool]:
    # The service re-reads the row under a lock; an unsaved instance carrying the pk is enough.
    # Each snapshot is its own transaction, as when they were written one step each.
    return [
        services.task_apply_snapshot(task=RemoteTask(pk=pk), snapshot=snapshot, source=source)
        for pk, snapshot in items
    ]


def _expire(pk: int, reason: str) -> None:
    services.task_mark_expired(task=RemoteTask(pk=pk), reason=reason)


def _record_error(pk: int, error: str) -> None:
    services.task_record_error(task=RemoteTask(pk=pk), error=error)


def _server_lag(snapshot: DetailedTask) -> float | None:
    """Seconds from the server's change (its lastUpdatedAt) to now, the mirror commit; None when the
    server's clock cannot be trusted for it (ahead of ours beyond the tolerance, or absurdly old)."""
    try:
        changed = datetime.fromisoformat(snapshot.last_updated_at)
    except (TypeError, ValueError):
        return None
    if changed.tzinfo is None:
        changed = changed.replace(tzinfo=UTC)
    lag = time.time() - changed.timestamp()
    if lag < -CLOCK_TOLERANCE_SECONDS or lag > MIRROR_LAG_MAX_SECONDS:
        return None
    return max(lag, 0.0)


def _deadline(snapshot: DetailedTask) -> float | None:
    try:
        created = datetime.fromisoformat(snapshot.created_at)
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created.timestamp() + (snapshot.ttl_ms or 0) / 1000


def _what_went_wrong(exc: TransportError) -> str:
    """What a person reads in the expiry note: unreachable only when it was."""
    if isinstance(exc, InvalidResponse):
        return f"the server answered wrongly ({exc})"
    if exc.status is not None:
        return f"the server answered HTTP {exc.status} ({exc})"
    return f"the server was unreachable ({exc})"
