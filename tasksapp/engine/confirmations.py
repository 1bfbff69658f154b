"""When a server last vouched for each task a worker polled or pushed: kept in memory and written
in batches, the time of the server's answer (to the second), not of the write."""

import logging
from datetime import datetime

from tasksapp.engine import store
from tasksapp.engine.store import db
from tasksapp.engine.tracking import TrackedTask
from tasksapp.lib.connections import CANNOT_WRITE

log = logging.getLogger(__name__)


class Confirmations:
    def __init__(self, worker: str) -> None:
        self.worker = worker
        self._confirmed: dict[int, datetime] = {}  # since the last flush (each heartbeat)
        self._polled: dict[int, datetime] = {}  # gateway tasks, since the last stamp (10 a second)

    def note(self, task: TrackedTask, answered: datetime) -> None:
        self._confirmed[task.pk] = answered
        if task.gateway:
            self._polled[task.pk] = answered

    async def flush_confirmed(self) -> None:
        """Write last_confirmed_at for the tasks noted since the last flush; kept for the next
        flush if the write fails."""
        confirmed, self._confirmed = self._confirmed, {}
        if confirmed:
            try:
                await db(store.confirm)(confirmed)
            except BaseException:
                self._confirmed = confirmed | self._confirmed  # try again at the next beat
                raise

    async def flush_polled(self) -> None:
        """Stamp the gateway tasks noted since the last stamp (a failure is logged, not retried)."""
        polled, self._polled = self._polled, {}
        if polled:
            try:
                await db(store.stamp_polled)(polled)
            except CANNOT_WRITE as exc:
                log.warning("worker %s: could not stamp gateway tasks (%s)", self.worker, exc)
