"""What a worker does while it cannot write the mirror: every poll waits for the database (one
back-off for all tasks, capped at DB_BACKOFF_MAX_SECONDS), instead of each task re-polling a server
whose answers cannot be recorded."""

import logging

from tasksapp.engine.tracking import backoff_delay

log = logging.getLogger(__name__)
DB_BACKOFF_MAX_SECONDS = 5.0


class DatabaseBackoff:
    def __init__(self, worker: str) -> None:
        self.worker = worker
        self.until = 0.0  # monotonic: no poll starts before it
        self._failures = 0

    def failed(self, exc: Exception, now: float) -> float:
        """A write failed at `now` (monotonic): returns until when polls wait. The wait grows only
        once the previous one has ended, so the many polls that fail together count once."""
        if self.until <= now:
            self._failures += 1
            delay = min(backoff_delay(self._failures), DB_BACKOFF_MAX_SECONDS)
            self.until = now + delay
            log.warning("worker %s: database unreachable (%s); polls wait %.1f s", self.worker, exc, delay)
        return self.until

    def ok(self) -> None:
        """A database step worked: polls no longer wait."""
        if self._failures:
            log.info("worker %s: the database is back", self.worker)
            self._failures, self.until = 0, 0.0
