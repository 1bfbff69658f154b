"""What a worker counts as it runs: polls, pushes, changes by path, and the lags its heartbeat reports."""

from collections import deque
from dataclasses import dataclass, field

LAG_SAMPLES = 100_000
PATHS = ("push", "poll", "safety_net")  # how a change reached the mirror


@dataclass
class WorkerStats:
    polls: int = 0
    pushes: int = 0
    changes: int = 0
    errors: int = 0
    lags: deque[float] = field(default_factory=lambda: deque(maxlen=LAG_SAMPLES))  # the latest lags
    since_beat: list[float] = field(default_factory=list)  # lags since the last heartbeat (for /metrics)

    mirror_lags: list[float] = field(default_factory=list)  # server change -> commit, since the beat
    push_lags: list[float] = field(default_factory=list)  # push received -> commit, since the beat
    by_path: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PATHS, 0))  # since start

    def record_change(self, path: str, *, server_lag: float | None, push_lag: float | None) -> None:
        self.by_path[path] += 1
        if server_lag is not None and len(self.mirror_lags) < LAG_SAMPLES:
            self.mirror_lags.append(server_lag)
        if push_lag is not None and len(self.push_lags) < LAG_SAMPLES:
            self.push_lags.append(push_lag)

    def take_mirror_ms(self) -> tuple[float, float, float] | None:
        """(p50, p99, max) in ms of server change -> mirror commit since the last call, or None."""
        window, self.mirror_lags = sorted(self.mirror_lags), []
        if not window:
            return None
        return _rank(window, 0.5) * 1000, _rank(window, 0.99) * 1000, window[-1] * 1000

    def take_push_ms(self) -> tuple[float, float] | None:
        """(p50, p99) in ms of push received -> mirror commit since the last call, or None."""
        window, self.push_lags = sorted(self.push_lags), []
        if not window:
            return None
        return _rank(window, 0.5) * 1000, _rank(window, 0.99) * 1000

    def record_lag(self, seconds: float) -> None:
        self.lags.append(seconds)
        if len(self.since_beat) < LAG_SAMPLES:
            self.since_beat.append(seconds)

    def take_lag_ms(self) -> tuple[float, float, float] | None:
        """(p50, p99, max) in ms of the lags since the last call, or None if there were none."""
        window, self.since_beat = sorted(self.since_beat), []
        if not window:
            return None
        return _rank(window, 0.5) * 1000, _rank(window, 0.99) * 1000, window[-1] * 1000


def _rank(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]
