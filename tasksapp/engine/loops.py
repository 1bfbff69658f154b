"""The loops a running worker keeps beside its poll loop: housekeeping (leases, stuck answers,
probes), the heartbeat, the daily purge and the gateway tasks' stamps. Each runs until cancelled
and outlives any one failure of its step."""

import asyncio
import logging
import time
from typing import Protocol

from asgiref.sync import SyncToAsync
from django.conf import settings

from tasksapp import services
from tasksapp.engine.confirmations import Confirmations
from tasksapp.engine.store import db
from tasksapp.lib.connections import CANNOT_WRITE, resilient
from tasksapp.retention import chores as retention_chores

log = logging.getLogger(__name__)
GATEWAY_STAMP_SECONDS = 0.1
PURGE_CHECK_SECONDS = 60.0


class Steps(Protocol):
    """The worker's steps these loops run (engine.worker.Worker)."""

    @property
    def name(self) -> str: ...
    @property
    def heartbeat_seconds(self) -> float: ...
    @property
    def refresh_seconds(self) -> float: ...
    async def refresh(self) -> None: ...
    async def beat(self) -> None: ...
    @property
    def confirmations(self) -> Confirmations: ...
    def probe_idle(self) -> None: ...


async def housekeeping(worker: Steps) -> None:
    """Leases, stuck answers and probes, beside the poll loop: a slow database statement
    (renewing 10,000 leases) must never hold back a poll that is due."""
    next_beat = next_refresh = 0.0
    while True:
        now = time.monotonic()
        try:
            if now >= next_beat:
                next_beat = now + worker.heartbeat_seconds
                await worker.confirmations.flush_confirmed()
                await db(services.input_resend_stuck)(older_than_seconds=60)
                await db(services.pending_calls_expire)()
                await db(services.input_prune_gone)(older_than_seconds=settings.MCP_INPUT_GONE_KEEP_SECONDS)
            if now >= next_refresh:
                next_refresh = now + worker.refresh_seconds
                await worker.refresh()
                worker.probe_idle()
        except CANNOT_WRITE as exc:  # a database restart: say so once a second, keep trying
            log.warning("worker %s: database unreachable (%s); retrying", worker.name, exc)
        except Exception:  # the loop boundary: a database hiccup must not stop the worker
            log.exception("worker %s: housekeeping failed; retrying", worker.name)
        await asyncio.sleep(max(0.05, min(next_beat, next_refresh) - time.monotonic()))


async def beating(worker: Steps) -> None:
    """A heartbeat every heartbeat_seconds, apart from housekeeping (whose steps wait for the
    shared database thread); one that failed (the database away) is tried again within a
    second, so the first write that works says the worker is alive."""
    while True:
        pause = worker.heartbeat_seconds
        try:
            await worker.beat()
        except CANNOT_WRITE as exc:
            log.warning("worker %s: could not write its heartbeat (%s); retrying", worker.name, exc)
            pause = min(1.0, pause)
        except Exception:  # the loop boundary: the beat must outlive any one failure
            log.exception("worker %s: heartbeat failed; retrying", worker.name)
            pause = min(1.0, pause)
        await asyncio.sleep(pause)


async def purging(worker: str) -> None:
    """The daily purge (tasksapp.retention), asked for every minute: the worker that claims its
    Chore row runs it, on a thread of its own in short batches, so polls carry on meanwhile."""
    step = SyncToAsync(resilient(retention_chores.purge_if_due), thread_sensitive=False)
    while True:
        try:
            await step(worker)
        except CANNOT_WRITE as exc:
            log.warning("worker %s: purge could not run (%s); trying again later", worker, exc)
        except Exception:  # the loop boundary: a failed purge must not stop the worker
            log.exception("worker %s: purge failed; trying again later", worker)
        await asyncio.sleep(PURGE_CHECK_SECONDS)


async def stamping_gateway_tasks(worker: Steps) -> None:
    """Every tenth of a second: when the server last confirmed the gateway tasks polled since."""
    while True:
        await asyncio.sleep(GATEWAY_STAMP_SECONDS)
        await worker.confirmations.flush_polled()
