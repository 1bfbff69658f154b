"""Whether a worker keeps up with its schedule: the scheduling lag (a poll's due time to its start)
over the polls since the previous heartbeat. Past MCP_WORKER_LAG_P99_MS at the 99th percentile the
worker is behind: it says so in its heartbeat row (the overview's workers panel shows it) and in a
WARNING, once when it falls behind and once a minute while it stays there. docs/deploy.md says when
to add a worker."""

import logging
from dataclasses import dataclass, field
from datetime import datetime

log = logging.getLogger(__name__)
MAX_SAMPLES = 20_000  # per heartbeat: enough for a p99, a bounded sort
MIN_SAMPLES = 20  # fewer polls than this since the last verdict: keep it, and the samples
REPEAT_SECONDS = 60.0


@dataclass
class ScheduleHealth:
    threshold_ms: float
    lags: list[float] = field(default_factory=list)  # seconds, since the last verdict
    behind_since: datetime | None = None
    note: str = ""
    _warned_at: datetime | None = None

    def observe(self, lag_seconds: float) -> None:
        if len(self.lags) < MAX_SAMPLES:
            self.lags.append(lag_seconds)

    def verdict(self, worker: str, now: datetime) -> bool:
        """Judge the polls since the last call; returns True when the stored signal must change."""
        window, self.lags = sorted(self.lags), []
        if not window:
            return self._recovered(worker) if self.behind_since else False  # idle: nothing is late
        if len(window) < MIN_SAMPLES:
            # Too few to judge yet: they count with the next beat's. (Dropping them would keep a
            # worker starved to under MIN_SAMPLES polls a beat, the one most behind, silent.)
            self.lags = window
            return False
        p99_ms = 1000 * window[min(len(window) - 1, int(0.99 * len(window)))]
        if p99_ms <= self.threshold_ms:
            return self._recovered(worker) if self.behind_since else False
        self.note = (
            f"polls start late: lag p99 {_seconds(p99_ms)} over the last {len(window):,} polls "
            f"(threshold {_seconds(self.threshold_ms)}); add a worker or a core (docs/deploy.md)"
        )
        if self.behind_since is None:
            self.behind_since = now
        if self._warned_at is None or (now - self._warned_at).total_seconds() >= REPEAT_SECONDS:
            self._warned_at = now
            log.warning("worker %s is behind its schedule since %s: %s", worker, self.behind_since, self.note)
        return True

    def _recovered(self, worker: str) -> bool:
        log.info("worker %s keeps up with its schedule again", worker)
        self.behind_since, self.note, self._warned_at = None, "", None
        return True


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"
