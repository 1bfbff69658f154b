"""Reading the gateway's traffic figures (tasksapp.models.GatewayTraffic): calls, error rate and
latency percentiles per tool and per agent, for a server's page and for /metrics.

Percentiles come from the merged histograms: each is the upper bound of the bucket it falls in
(LATENCY_BOUNDS_MS: 0.5 ms to 10 min, about one and a half times apart), so "p99 ≤ 15 ms".
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tasksapp.models import LATENCY_BOUNDS_MS, GatewayTraffic


@dataclass
class Figures:
    calls: int = 0
    errors: int = 0
    total_ms: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))

    def add(self, row: dict[str, Any]) -> None:
        self.calls += row["calls"]
        self.errors += row["errors"]
        self.total_ms += row["total_ms"]
        for i, count in enumerate(row["buckets"][: len(self.buckets)]):
            self.buckets[i] += count

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    def percentile_ms(self, share: float) -> float | None:
        """The latency `share` of the timed requests stayed within (a bucket's upper bound)."""
        timed = sum(self.buckets)
        if not timed:
            return None
        wanted, seen = share * timed, 0
        for i, count in enumerate(self.buckets):
            seen += count
            if seen >= wanted and count:
                return LATENCY_BOUNDS_MS[i] if i < len(LATENCY_BOUNDS_MS) else float("inf")
        return float("inf")

    @property
    def p50_ms(self) -> float | None:
        return self.percentile_ms(0.5)

    @property
    def p99_ms(self) -> float | None:
        return self.percentile_ms(0.99)


def _rows(since: datetime, server_id: int | None = None) -> list[dict[str, Any]]:
    rows = GatewayTraffic.objects.filter(minute__gte=since)
    if server_id is not None:
        rows = rows.filter(server_id=server_id)
    columns = (
        "minute",
        "server__name",
        "agent__name",
        "method",
        "tool",
        "calls",
        "errors",
        "total_ms",
        "buckets",
    )
    return [dict(row) for row in rows.values(*columns)]


def label(row: dict[str, Any]) -> str:
    """What a row counts: the tool for tools/call, the method otherwise."""
    return f"{row['tool']}" if row["method"] == "tools/call" and row["tool"] else str(row["method"])


def server_traffic(server_id: int, since: datetime) -> dict[str, Any]:
    """For a server's page: all of it, per tool (or method), per agent."""
    total = Figures()
    tools: defaultdict[str, Figures] = defaultdict(Figures)
    agents: defaultdict[str, Figures] = defaultdict(Figures)
    for row in _rows(since, server_id):
        total.add(row)
        tools[label(row)].add(row)
        agents[row["agent__name"]].add(row)
    return {"total": total, "tools": sorted(tools.items()), "agents": sorted(agents.items())}


def all_traffic(windows: dict[str, datetime]) -> dict[tuple[str, str, str, str, str], Figures]:
    """For /metrics, in one query: (window, server, agent, method, tool) -> figures."""
    found: defaultdict[tuple[str, str, str, str, str], Figures] = defaultdict(Figures)
    for row in _rows(min(windows.values())):
        for window, since in windows.items():
            if row["minute"] >= since:
                found[(window, row["server__name"], row["agent__name"], row["method"], row["tool"])].add(row)
    return dict(found)
