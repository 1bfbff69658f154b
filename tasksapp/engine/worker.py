"""The Worker: holds leased tasks in memory, polls each when due, applies changes through services.

It owns the tasks and their schedule; the servers they live on are a ServerPool's (engine.servers),
which hands each listen stream this worker as its TaskBoard (engine.listener). What a poll's outcome
means for its task is engine.outcomes', which sees this worker as HeldTasks.
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from tasksapp.engine import loops, snapshots, store
from tasksapp.engine.confirmations import Confirmations
from tasksapp.engine.dbbackoff import DatabaseBackoff
from tasksapp.engine.health import ScheduleHealth
from tasksapp.engine.heartbeat import Heartbeat
from tasksapp.engine.leases import LeaseClock
from tasksapp.engine.listener import Pushed
from tasksapp.engine.nudges import follow_nudges
from tasksapp.engine.outcomes import PollOutcomes
from tasksapp.engine.pollqueue import PollQueue
from tasksapp.engine.servers import ServerChanges, ServerPool
from tasksapp.engine.stats import WorkerStats
from tasksapp.engine.store import db
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay, poll_delay
from tasksapp.lib.connections import CANNOT_WRITE
from tasksapp.mcpclient import DetailedTask
from tasksapp.services.tasks import snapshot_fingerprint

log = logging.getLogger(__name__)


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
        self.queue = PollQueue()
        self.max_in_flight = max_in_flight
        self._in_flight: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()
        self._heartbeat = Heartbeat(self.name)
        self._leases = LeaseClock()
        self._adopted = False
        self._database = DatabaseBackoff(self.name)
        self._outcomes = PollOutcomes(pool=self.pool, stats=self.stats, held=self)
        self.confirmations = Confirmations(self.name)

    # --- the steps ------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Sync servers, renew leases now and then, claim new tasks, and drop what is gone."""
        self._follow_servers(self.pool.sync(await db(store.enabled_servers)(self.name)))
        if not self._adopted:
            # A process restarted under the same --name takes over what its predecessor held at once.
            began = time.monotonic()
            self._track_all(await db(store.load_tasks)(await db(store.adopt)(self.name)))
            self._leases.held_from(began)
            self._adopted = True
        if self._leases.renewal_due(time.monotonic()):
            began = time.monotonic()
            self._leases.renewing(began)
            held = await db(store.renew)(self.name, set(self.tasks))
            for pk in self.tasks.keys() - held:
                self.forget(pk)
            self._leases.held_from(began)
            await self._shed_excess()
        began = time.monotonic()
        while new := await db(store.claim)(self.name, len(self.tasks)):
            if not self.tasks:  # only new leases held: they are good from this claim on
                self._leases.held_from(began)
            self._track_all(await db(store.load_tasks)(new - self.tasks.keys()))
            if len(new) < store.CLAIM_BATCH:
                break
        self._database.ok()
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
        while len(self._in_flight) < self.max_in_flight and (entry := self.queue.pop_due(now)):
            due, pk = entry
            task = self.tasks.get(pk)
            if task is None or task.due != due or task.in_flight:
                continue
            server = self.pool.get(task.server_id)
            if server is None:
                continue
            if self._leases_lapsing(now, task):
                continue
            if server.backing_off(now) or self._database.until > now:
                until = max(server.backoff_until, self._database.until)
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
        if not self._leases.lapsing(now):
            return False
        self.queue.wake()
        self.schedule(task, 0.5)
        return True

    async def drain(self) -> None:
        """Wait for every poll in flight (used by --once and by tests)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def beat(self) -> None:
        streams = self.pool.streams_connected()
        await self._heartbeat.beat(
            held=len(self.tasks), streams=streams, stats=self.stats, health=self.health
        )

    def probe_idle(self) -> None:
        self.pool.probe_idle()

    @property
    def polls_in_flight(self) -> int:
        return len(self._in_flight)

    def shift_schedule(self, seconds: float) -> None:
        """Move every due time on by `seconds`, keeping the order, and wake the poll loop (a pause
        that resumes at the worker's own pace: bench/worker.py)."""
        self.queue.shift(seconds, self.tasks.values())
        self.queue.wake()

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
            asyncio.create_task(loops.housekeeping(self)),
            asyncio.create_task(loops.beating(self)),
            asyncio.create_task(loops.purging(self.name)),
            asyncio.create_task(loops.stamping_gateway_tasks(self)),
        ]
        try:
            while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
                await self.poll_due()
                await self.queue.sleep(deadline)
        finally:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            await self.shutdown()

    def stop(self) -> None:
        self._stop.set()
        self.queue.wake()

    async def shutdown(self) -> None:
        await self.pool.close_listeners()
        for poll in list(self._in_flight):
            poll.cancel()
        await asyncio.gather(*self._in_flight, return_exceptions=True)
        await self.pool.close_clients()
        await self.confirmations.flush_confirmed()
        await self.confirmations.flush_polled()
        await db(store.release)(self.name)
        await db(store.heartbeat_stop)(self.name)
        await self._heartbeat.close()

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
        self.queue.push(task, delay)

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
            results = await db(snapshots.apply_snapshots)([(t.pk, snap) for t, snap, _ in moved], source)
            committed = time.monotonic()
            for (task, snapshot, received), changed in zip(moved, results, strict=True):
                path = "push" if source == "push" else "safety_net" if task.pushed else "poll"
                task.fingerprint = snapshot_fingerprint(snapshot)
                self.stats.changes += int(changed)
                if changed:
                    push_lag = committed - received if received is not None else None
                    self.stats.record_change(
                        path, server_lag=snapshots.server_lag(snapshot), push_lag=push_lag
                    )
                if snapshot.ttl_ms is not None and snapshot.created_at:
                    task.ttl_deadline = snapshots.ttl_deadline(snapshot)
        answered = timezone.now()
        ended: list[int] = []
        for task, snapshot, _ in items:
            task.poll_interval_ms = snapshot.poll_interval_ms
            task.errors = 0
            self.confirmations.note(task, answered)
            if snapshot.is_terminal:
                self.forget(task.pk)
                ended.append(task.pk)
            elif source == "poll":
                self.schedule(task, self.next_delay(task))
        if ended:
            await db(store.release)(self.name, ended)

    def next_delay(self, task: TrackedTask) -> float:
        """The server's interval (a slow safety net under a healthy stream), but never past the TTL:
        a task is looked at again just after its TTL, to see whether the server has dropped it, and
        past its TTL at the server's own interval until it has (a stream says nothing of a drop)."""
        delay = poll_delay(task.poll_interval_ms, covered=task.pushed)
        if task.ttl_deadline is not None:
            left = task.ttl_deadline - time.time()
            if left > 0:
                delay = min(delay, left + 0.1)
            else:
                delay = min(delay, poll_delay(task.poll_interval_ms, covered=False))
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
                await self._outcomes.poll_once(task, server)
        except CANNOT_WRITE as exc:  # the mirror cannot be written: every poll waits, not just this one
            self.stats.errors += 1
            now = time.monotonic()
            self.schedule(task, self._database.failed(exc, now) - now + random.uniform(0, 1))
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
                self.queue.wake()  # a slot frees up for polls that are already due

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
            self._leases.renew_soon()
            self.queue.wake()
