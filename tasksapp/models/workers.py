"""The workers: each one's heartbeat and figures, and the chores one worker among several runs
now and then (the daily purge, the health check's write probe): one row per name, its last run
and who holds it."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkerHeartbeat(models.Model):
    worker = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_beat_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    tasks_held = models.PositiveIntegerField(default=0)
    polls = models.PositiveBigIntegerField(default=0)
    pushes = models.PositiveBigIntegerField(default=0)
    streams_open = models.PositiveIntegerField(default=0)
    # Figures for /metrics, written with each beat so any web process can read every worker's.
    poll_errors = models.PositiveBigIntegerField(default=0)
    lag_p50_ms = models.FloatField(null=True, blank=True, help_text="scheduling lag since the previous beat")
    lag_p99_ms = models.FloatField(null=True, blank=True)
    lag_max_ms = models.FloatField(null=True, blank=True)
    # Server change (its lastUpdatedAt, where its clock is sane) -> mirror commit, since the previous
    # beat that had changes; push received -> commit; the changes written since start by path.
    mirror_p50_ms = models.FloatField(null=True, blank=True)
    mirror_p99_ms = models.FloatField(null=True, blank=True)
    mirror_max_ms = models.FloatField(null=True, blank=True)
    push_p50_ms = models.FloatField(null=True, blank=True)
    push_p99_ms = models.FloatField(null=True, blank=True)
    changes_push = models.PositiveBigIntegerField(default=0)
    changes_poll = models.PositiveBigIntegerField(default=0)
    changes_safety_net = models.PositiveBigIntegerField(default=0)
    # Falling behind the servers' intervals (scheduling lag p99 over its threshold): since when, and
    # the figures in words; empty while the worker keeps up. Shown on the overview's workers panel.
    behind_since = models.DateTimeField(null=True, blank=True)
    behind_note = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["-last_beat_at"]

    def __str__(self) -> str:
        return self.worker

    @property
    def push_percent(self) -> int | None:
        """The share of changes that came by push, in percent (None before any change)."""
        total = self.changes_push + self.changes_poll + self.changes_safety_net
        return round(100 * self.changes_push / total) if total else None

    @property
    def mirror_behind_seconds(self) -> float | None:
        """The mirror's p99 lag behind the servers, when over MCP_MIRROR_LAG_WARN_MS; else None."""
        p99 = self.mirror_p99_ms
        if p99 is None or p99 <= settings.MCP_MIRROR_LAG_WARN_MS:
            return None
        return p99 / 1000

    def is_alive(self, now: datetime | None = None) -> bool:
        now = now or timezone.now()
        return self.stopped_at is None and now - self.last_beat_at < timedelta(
            seconds=settings.MCP_LEASE_SECONDS
        )


class Chore(models.Model):
    """`lease_owner` holds the chore until `lease_until` (a conditional UPDATE claims it, so one
    worker of several runs it); `last_run_at` and `last_result` say what the last run did."""

    name = models.CharField(max_length=50, unique=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(default=dict, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "tasksapp"

    def __str__(self) -> str:
        return self.name
