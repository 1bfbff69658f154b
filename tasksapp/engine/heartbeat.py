"""A worker's heartbeat row, written on a database thread (and connection) of its own: on the
shared one it queued behind every poll's step, and after a database outage under load the backlog
held it past the lease, so /healthz and the overview said "workers alive: 0" for a few seconds."""

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from asgiref.sync import SyncToAsync
from django.utils import timezone

from tasksapp.engine import store
from tasksapp.engine.health import ScheduleHealth
from tasksapp.engine.stats import WorkerStats
from tasksapp.lib.connections import resilient


class Heartbeat:
    def __init__(self, worker: str) -> None:
        self.worker = worker
        self.started: datetime = timezone.now()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")

    async def beat(self, *, held: int, streams: int, stats: WorkerStats, health: ScheduleHealth) -> None:
        """Write the beat (taking the figures since the last one off `stats`), and the schedule's
        health when its verdict changed."""
        await self._on_thread(store.heartbeat)(
            self.worker,
            started=self.started,
            held=held,
            polls=stats.polls,
            pushes=stats.pushes,
            streams=streams,
            errors=stats.errors,
            lag_ms=stats.take_lag_ms(),
            mirror_ms=stats.take_mirror_ms(),
            push_ms=stats.take_push_ms(),
            by_path=dict(stats.by_path),
        )
        if health.verdict(self.worker, timezone.now()):
            await self._on_thread(store.heartbeat_health)(
                self.worker, behind_since=health.behind_since, note=health.note
            )

    async def close(self) -> None:
        """Close the thread's database connection, then the thread."""
        await self._on_thread(_close_connections)()
        self._thread.shutdown(wait=False)

    def _on_thread[**P, R](self, fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        step: Callable[P, Awaitable[R]] = SyncToAsync(
            resilient(fn), thread_sensitive=False, executor=self._thread
        )
        return step


def _close_connections() -> None:
    from django.db import connections

    connections.close_all()
