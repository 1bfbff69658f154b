"""Prometheus figures and the health check, both read from the database at request time.

Workers are separate processes (often on other machines), so their figures travel in their heartbeat
rows (tasksapp.engine.store.heartbeat, every few seconds) rather than in prometheus_client's
multiprocess files: any web process can serve /metrics for the whole deployment, and a worker that
died stops being reported once its heartbeat is older than the lease. Each scrape builds a fresh
registry with one collector; it runs a fixed number of queries whatever the number of tasks.
"""

import logging
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from tasksapp import redislayer
from tasksapp.models import InputRequest, McpServer, PendingCall, RemoteTask, ServerHealth, WorkerHeartbeat
from tasksapp.traffic import all_traffic

log = logging.getLogger(__name__)

# The live layer's caches (tasksapp.live.cache.RenderCache), counted in this process (tests and
# benchmarks read them): "renders" and "renders_shared" (tasksapp/live/shared.py; "renders" counts
# fan-out batches' rows too), "batch_shared" (tasksapp/live/fanout.py, with its "batches",
# "batch_items" and "batch_waits"), "changed_since", "changed_since_reused", "timeline_rendered",
# "timeline_reused" (tasksapp/live/pages.py), "frames_built" and "frames_sent" (tasksapp/live/rooms.py:
# a frame is built once per room and shape, and sent to each of its sockets).
live_counts: Counter[str] = Counter()

ANSWER_BUCKETS = (5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


def live_heartbeats() -> list[WorkerHeartbeat]:
    """Workers that beat within the lease window and have not said they stopped."""
    since = timezone.now() - timedelta(seconds=settings.MCP_LEASE_SECONDS)
    return list(WorkerHeartbeat.objects.filter(stopped_at__isnull=True, last_beat_at__gte=since))


class DashboardCollector(Collector):
    def collect(self) -> Iterator[Any]:
        beats = live_heartbeats()
        yield from self._tasks()
        yield from self._inputs()
        yield from self._servers()
        yield from self._views(beats)
        yield from self._workers(beats)
        yield from self._live()
        yield from self._gateway()

    def _tasks(self) -> Iterator[Any]:
        tasks = GaugeMetricFamily(
            "mcp_tasks", "Tasks in the mirror by status (expired apart)", labels=["status"]
        )
        counts = RemoteTask.objects.values("status", "expired").annotate(n=Count("id")).order_by()
        by_status: dict[str, int] = {}
        for row in counts:
            status = "expired" if row["expired"] else row["status"]
            by_status[status] = by_status.get(status, 0) + row["n"]
        for status, n in sorted(by_status.items()):
            tasks.add_metric([status], n)
        yield tasks

    def _inputs(self) -> Iterator[Any]:
        open_requests = GaugeMetricFamily(
            "mcp_input_requests_open", "Input requests waiting for a person", labels=["kind"]
        )
        open_requests.add_metric(
            ["task"], InputRequest.objects.filter(state="open", task__expired=False).count()
        )
        open_requests.add_metric(["pre_task"], PendingCall.objects.waiting().count())
        yield open_requests
        yield self._answer_latency()

    def _answer_latency(self) -> HistogramMetricFamily:
        """Seconds from an input request first seen to a person's answer, over every answered request."""
        answered = InputRequest.objects.filter(answered_at__isnull=False)
        waited = ExpressionWrapper(F("answered_at") - F("first_seen_at"), output_field=DurationField())
        buckets = {
            f"b{i}": Count("id", filter=Q(answered_at__lte=F("first_seen_at") + timedelta(seconds=bound)))
            for i, bound in enumerate(ANSWER_BUCKETS)
        }
        figures = answered.aggregate(total=Count("id"), waited=Sum(waited), **buckets)
        cumulative = [(_bound(b), float(figures[f"b{i}"])) for i, b in enumerate(ANSWER_BUCKETS)]
        total_waited = figures["waited"] or timedelta()
        family = HistogramMetricFamily(
            "mcp_input_answer_seconds", "Time from an input request appearing to a person answering it"
        )
        family.add_metric(
            [],
            [*cumulative, ("+Inf", float(figures["total"]))],
            sum_value=total_waited.total_seconds(),
        )
        return family

    def _servers(self) -> Iterator[Any]:
        servers = GaugeMetricFamily("mcp_servers", "Registered MCP servers by health", labels=["health"])
        health: dict[str, int] = {}
        columns = ("enabled", "archived", "backoff_until", "consecutive_failures", "last_success_at")
        for server in McpServer.objects.only(*columns):
            health[server.health] = health.get(server.health, 0) + 1
        for name, n in sorted(health.items()):
            servers.add_metric([name], n)
        yield servers

    def _views(self, beats: list[WorkerHeartbeat]) -> Iterator[Any]:
        """Each live worker's view of each server (tasksapp.services.health): 0 while it reaches it."""
        views = GaugeMetricFamily(
            "mcp_server_worker_failures",
            "Consecutive failures of each live worker on each server (0: it reaches the server)",
            labels=["server", "worker"],
        )
        live = [beat.worker for beat in beats]
        rows = ServerHealth.objects.filter(worker__in=live).values_list(
            "server__name", "worker", "consecutive_failures"
        )
        for server, worker, failures in rows.order_by("server__name", "worker"):
            views.add_metric([server, worker], failures)
        yield views

    def _workers(self, beats: list[WorkerHeartbeat]) -> Iterator[Any]:
        alive = GaugeMetricFamily("mcp_workers_alive", "Workers whose heartbeat is within the lease window")
        alive.add_metric([], len(beats))
        yield alive
        polls = CounterMetricFamily("mcp_worker_polls", "tasks/get polls answered", labels=["worker"])
        errors = CounterMetricFamily("mcp_worker_poll_errors", "Polls that failed", labels=["worker"])
        pushes = CounterMetricFamily(
            "mcp_worker_pushes", "Changes received on listen streams", labels=["worker"]
        )
        streams = GaugeMetricFamily("mcp_worker_listen_streams", "Open listen streams", labels=["worker"])
        held = GaugeMetricFamily("mcp_worker_tasks_held", "Tasks leased by the worker", labels=["worker"])
        lag = GaugeMetricFamily(
            "mcp_worker_schedule_lag_seconds",
            "How late polls started against their schedule, since the previous heartbeat",
            labels=["worker", "quantile"],
        )
        mirror = GaugeMetricFamily(
            "mcp_worker_mirror_lag_seconds",
            "Server change (its lastUpdatedAt, clock sane) to mirror commit, since the previous "
            "heartbeat with changes",
            labels=["worker", "quantile"],
        )
        push = GaugeMetricFamily(
            "mcp_worker_push_commit_seconds",
            "Pushed change received to mirror commit, since the previous heartbeat with pushes",
            labels=["worker", "quantile"],
        )
        changes = CounterMetricFamily(
            "mcp_worker_changes",
            "Changes written to the mirror, by how they came (push, poll, safety_net: the slow poll "
            "of a task a listen stream covers)",
            labels=["worker", "path"],
        )
        for beat in beats:
            for quantile, value in (
                ("0.5", beat.mirror_p50_ms),
                ("0.99", beat.mirror_p99_ms),
                ("1", beat.mirror_max_ms),
            ):
                if value is not None:
                    mirror.add_metric([beat.worker, quantile], value / 1000)
            for quantile, value in (("0.5", beat.push_p50_ms), ("0.99", beat.push_p99_ms)):
                if value is not None:
                    push.add_metric([beat.worker, quantile], value / 1000)
            changes.add_metric([beat.worker, "push"], beat.changes_push)
            changes.add_metric([beat.worker, "poll"], beat.changes_poll)
            changes.add_metric([beat.worker, "safety_net"], beat.changes_safety_net)
        yield from (mirror, push, changes)
        for beat in beats:
            polls.add_metric([beat.worker], beat.polls)
            errors.add_metric([beat.worker], beat.poll_errors)
            pushes.add_metric([beat.worker], beat.pushes)
            streams.add_metric([beat.worker], beat.streams_open)
            held.add_metric([beat.worker], beat.tasks_held)
            for quantile, value in (
                ("0.5", beat.lag_p50_ms),
                ("0.99", beat.lag_p99_ms),
                ("1", beat.lag_max_ms),
            ):
                if value is not None:
                    lag.add_metric([beat.worker, quantile], value / 1000)
        yield from (polls, errors, pushes, streams, held, lag)

    def _live(self) -> Iterator[Any]:
        """Live updates lost on the way and pages re-synced (tasksapp/redislayer.py): every web
        process and worker adds to the same figures in Redis."""
        try:
            figures = redislayer.counts()
        except Exception:  # Redis away: /healthz says so; the rest of the scrape still answers
            log.warning("metrics: the live-update counters could not be read from Redis", exc_info=True)
            return
        dropped = CounterMetricFamily(
            "mcp_live_dropped",
            "Live-update messages dropped: to a full channel (channel_full) or a socket's full buffer "
            "(buffer_full); the pages re-sync",
            labels=["where"],
        )
        for where in redislayer.DROPPED:
            dropped.add_metric([where], figures.get(where, 0))
        resyncs = CounterMetricFamily(
            "mcp_live_resyncs", "Page sockets that noticed a dropped message and caught up", labels=["reason"]
        )
        for reason in redislayer.RESYNCS:
            resyncs.add_metric([reason], figures.get(f"resync_{reason}", 0))
        yield from (dropped, resyncs)

    def _gateway(self) -> Iterator[Any]:
        """The gateway's traffic over the last hour and day, as on each server's page."""
        labels = ["window", "server", "agent", "method", "tool"]
        calls = GaugeMetricFamily("mcp_gateway_calls", "Gateway requests in the window", labels=labels)
        errors = GaugeMetricFamily(
            "mcp_gateway_errors", "Gateway requests answered with an error", labels=labels
        )
        latency = GaugeMetricFamily(
            "mcp_gateway_latency_seconds",
            "Gateway latency percentile in the window (a histogram bucket's upper bound)",
            labels=[*labels, "quantile"],
        )
        now = timezone.now()
        windows = {"1h": now - timedelta(hours=1), "1d": now - timedelta(days=1)}
        for key, figures in sorted(all_traffic(windows).items()):
            values = list(key)
            calls.add_metric(values, figures.calls)
            errors.add_metric(values, figures.errors)
            for quantile, ms in (("0.5", figures.p50_ms), ("0.99", figures.p99_ms)):
                if ms is not None:
                    latency.add_metric([*values, quantile], ms / 1000)
        yield from (calls, errors, latency)


def _bound(seconds: float) -> str:
    return f"{seconds:g}"


def exposition() -> bytes:
    """The Prometheus text format for one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector())
    return generate_latest(registry)
