"""Figures kept beside the rows: task counts per server and state and tasks per hour (kept by
database triggers, tasksapp.counts), and the gateway's traffic per minute."""

from django.db import models

from tasksapp.models.people import Agent
from tasksapp.models.servers import McpServer


class TaskCount(models.Model):
    """Tasks per server and state bucket, kept by database triggers (tasksapp.counts): never written
    by Python code, so no write path can forget it."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    status = models.CharField(max_length=20)
    expired = models.BooleanField()
    is_tool_error = models.BooleanField()
    cancel_requested = models.BooleanField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["server", "status", "expired", "is_tool_error", "cancel_requested"],
                name="unique_count",
            )
        ]

    def __str__(self) -> str:
        return f"{self.n} {self.status} on {self.server_id}"


class TaskHour(models.Model):
    """Tasks started (created_at) and finished (finished_at) per UTC hour, kept by the same triggers."""

    hour = models.DateTimeField(unique=True)
    started = models.BigIntegerField(default=0)
    finished = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 +{self.started} / {self.finished} done"


# Latency buckets of the gateway's traffic figures, in milliseconds (the last one is open-ended).
LATENCY_BOUNDS_MS = (
    0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 7500, 10_000, 20_000, 30_000, 60_000, 120_000, 300_000, 600_000,
)  # fmt: skip


class GatewayTraffic(models.Model):
    """Gateway requests per minute, server, agent, method and tool: counts, errors and a latency
    histogram (counts per LATENCY_BOUNDS_MS bucket, one more for beyond the last). Written by each
    Daphne process every few seconds (tasksapp.services.traffic); kept MCP_GATEWAY_TRAFFIC_DAYS."""

    minute = models.DateTimeField()
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    method = models.CharField(max_length=60)
    tool = models.CharField(max_length=200, blank=True, default="")
    calls = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    total_ms = models.FloatField(default=0)
    buckets = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "server", "agent", "method", "tool"], name="unique_traffic"
            )
        ]
        indexes = [models.Index(fields=["server", "minute"], name="traffic_server_minute")]

    def __str__(self) -> str:
        return f"{self.calls} {self.method} {self.tool} at {self.minute:%H:%M}"
