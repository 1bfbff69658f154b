"""What one tasks/get's outcome means for the polled task: an answer is applied; an error answer is
recorded on the row, or ends the task when the server no longer knows it; a transport failure backs
the server off, or expires the task once its TTL has passed; a server that needs a person to
reconnect makes the task wait. Every outcome reschedules or forgets the task.

The outcomes know the worker only as HeldTasks: schedule a task, forget it, apply a snapshot.
"""

import random
import time
from typing import Protocol

from django.conf import settings

from tasksapp import services
from tasksapp.engine import snapshots
from tasksapp.engine.servers import ServerPool
from tasksapp.engine.stats import WorkerStats
from tasksapp.engine.store import db
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay
from tasksapp.mcpclient import DetailedTask, McpError, ProtocolError, TransportError
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.services.errors import describe

AUTHORIZATION_WAIT_SECONDS = 60.0  # a task whose server needs a person to reconnect looks again this often


class HeldTasks(Protocol):
    """What a poll's outcome does to the tasks the worker holds (engine.worker.Worker)."""

    def schedule(self, task: TrackedTask, delay: float) -> None:
        """Poll `task` `delay` seconds from now (0: at once), replacing its current due time."""
        ...

    def forget(self, pk: int) -> None:
        """Stop watching task `pk`."""
        ...

    async def apply(
        self, task: TrackedTask, snapshot: DetailedTask, source: str, received: float | None = None
    ) -> None:
        """Write `snapshot` if it moved, then poll `task` again or forget it (a terminal status)."""
        ...


class PollOutcomes:
    def __init__(self, *, pool: ServerPool, stats: WorkerStats, held: HeldTasks) -> None:
        self._pool = pool
        self._stats = stats
        self._held = held

    async def poll_once(self, task: TrackedTask, server: ServerState) -> None:
        """One tasks/get and what follows from it: whatever the server answers, or however it fails,
        the task is rescheduled or forgotten. What this raises (the mirror cannot be written, or
        anything unforeseen) is the caller's to handle, the task not rescheduled."""
        try:
            snapshot = await server.client.get_task(task.remote_id)
        except ProtocolError as exc:
            await self._pool.record_answer(server)  # it answered: reachable, whatever it thinks of the task
            await self._task_failed(task, exc)
            return
        except TransportError as exc:
            await self._server_failed(server, exc, task)
            return
        except AuthorizationRequired as exc:
            # A person must reconnect: the task is kept (never expired for this) and waits; a
            # reconnect changes the server's row, and the new client polls it at once.
            self._stats.errors += 1
            await db(services.oauth_mark_needed)(server_id=server.server_id, exc=exc)
            self._held.schedule(task, AUTHORIZATION_WAIT_SECONDS)
            return
        except McpError as exc:
            await self._task_failed(task, exc)
            return
        self._stats.polls += 1
        await self._pool.record_answer(server)
        await self._held.apply(task, snapshot, "poll")

    async def _task_failed(self, task: TrackedTask, exc: McpError) -> None:
        self._stats.errors += 1
        if isinstance(exc, ProtocolError) and exc.is_not_found:
            await db(snapshots.expire)(task.pk, "the server no longer knows this task (-32602)")
            self._held.forget(task.pk)
            return
        task.errors += 1
        await db(snapshots.record_error)(task.pk, describe(exc))
        self._held.schedule(task, backoff_delay(task.errors))

    async def _server_failed(self, server: ServerState, exc: TransportError, task: TrackedTask) -> None:
        now = time.monotonic()
        await self._pool.record_failure(server, exc)
        grace = settings.MCP_TTL_GRACE_MS / 1000
        if task.ttl_deadline is not None and time.time() > task.ttl_deadline + grace:
            await db(snapshots.expire)(task.pk, f"its TTL passed while {snapshots.what_went_wrong(exc)}")
            self._held.forget(task.pk)
            return
        self._held.schedule(task, server.backoff_until - now + random.uniform(0, 1))
