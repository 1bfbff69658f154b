"""Writing the gateway's traffic figures: what a Daphne process counted, merged into per-minute rows.

One transaction per flush, a handful of rows each (one per minute, server, agent, method and tool
seen since the last flush); rows older than MCP_GATEWAY_TRAFFIC_DAYS go at the same time.
"""

import bisect
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tasksapp.models import LATENCY_BOUNDS_MS, Agent, GatewayTraffic

# (minute, server id, agent id, method, tool)
TrafficKey = tuple[datetime, int, int, str, str]


@dataclass
class Tally:
    calls: int = 0
    errors: int = 0
    total_ms: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))

    def add(self, ms: float | None, *, error: bool) -> None:
        """One request; `ms` None for one whose duration says nothing (a listen stream)."""
        self.calls += 1
        self.errors += int(error)
        if ms is not None:
            self.total_ms += ms
            self.buckets[bisect.bisect_left(LATENCY_BOUNDS_MS, ms)] += 1

    def merge(self, buckets: list[int]) -> list[int]:
        width = len(self.buckets)
        old = [*buckets[:width], *([0] * (width - len(buckets)))]
        return [a + b for a, b in zip(old, self.buckets, strict=True)]


def traffic_record(*, tallies: dict[TrafficKey, Tally], seen: dict[int, datetime]) -> None:
    """Add one process's counts to the minute rows; note when each agent was last seen."""
    with transaction.atomic():
        for (minute, server, agent, method, tool), tally in tallies.items():
            row, _ = GatewayTraffic.objects.select_for_update().get_or_create(
                minute=minute, server_id=server, agent_id=agent, method=method[:60], tool=tool[:200]
            )
            row.calls += tally.calls
            row.errors += tally.errors
            row.total_ms += tally.total_ms
            row.buckets = tally.merge(row.buckets if isinstance(row.buckets, list) else [])
            row.save()
        for agent, at in seen.items():
            Agent.objects.filter(pk=agent).update(last_used_at=at)
        cutoff = timezone.now() - timedelta(days=settings.MCP_GATEWAY_TRAFFIC_DAYS)
        GatewayTraffic.objects.filter(minute__lt=cutoff).delete()
