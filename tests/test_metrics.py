"""Operations: Prometheus /metrics (a token or a login) with worker figures carried in
heartbeat rows, and /healthz for load balancers (no login, no secrets, 200/503)."""

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tasksapp import services
from tasksapp.models import InputRequest, McpServer, RemoteTask, WorkerHeartbeat
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until
from tests.support.opsdata import logged_in, person, samples, server, task

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-token-for-tests-0123456789"


@override_settings(METRICS_TOKEN=TOKEN)
def test_metrics_needs_the_token_or_a_login() -> None:
    url = reverse("tasks:metrics")
    refused = Client().get(url)
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert Client().get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert Client().get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert logged_in(person("vera", "viewer")).get(url).status_code == 200


@override_settings(METRICS_TOKEN=TOKEN)
def test_a_scrape_runs_seven_queries_at_any_size() -> None:
    alpha = server()

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = Client().get(reverse("tasks:metrics"), headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 200
        return len(captured.captured_queries)

    task(alpha)
    assert queries() == 7  # the gateway traffic: one query for both windows
    for status in ("working", "completed", "failed", "input_required"):
        for _ in range(20):
            task(alpha, status=status)
    assert queries() == 7  # the gateway traffic: one query for both windows


def test_metrics_report_tasks_inputs_answers_and_the_workers_figures(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    alpha = server("alpha")
    task(alpha, status="completed")
    task(alpha, status="working", expired=True)
    asking = task(alpha, status="input_required")
    open_request = InputRequest(task=asking, method="elicitation/create")
    open_request.set_key("k1")
    open_request.save()
    answered = InputRequest(task=asking, method="elicitation/create", state="answered")
    answered.set_key("k2")
    answered.save()
    InputRequest.objects.filter(pk=answered.pk).update(
        answered_at=answered.first_seen_at + timedelta(seconds=42)
    )
    started = services.call_start(
        server=demo_registered, tool="slow_count", arguments={"n": 2, "delay": 0.1}, user=None
    )
    assert started.task is not None
    pk = started.task.pk

    # The worker is another process in production: all /metrics sees of it is its heartbeat row.
    # One poll may be all the task needs (it can be done by the time the worker starts).
    run_worker_until(
        lambda: (
            WorkerHeartbeat.objects.filter(polls__gte=1).exists()
            and RemoteTask.objects.get(pk=pk).status == "completed"
        ),
        listen=False,
        heartbeat_seconds=0.1,
    )
    WorkerHeartbeat.objects.update(stopped_at=None, last_beat_at=timezone.now())  # as if still running
    text = logged_in(person("vera", "viewer")).get(reverse("tasks:metrics")).content.decode()
    got = samples(text)

    assert got[("mcp_tasks", (("status", "completed"),))] == 2
    assert got[("mcp_tasks", (("status", "expired"),))] == 1
    assert got[("mcp_tasks", (("status", "input_required"),))] == 1
    assert got[("mcp_input_requests_open", (("kind", "task"),))] == 1
    assert got[("mcp_input_answer_seconds_count", ())] == 1
    assert got[("mcp_input_answer_seconds_sum", ())] == pytest.approx(42, abs=0.01)
    assert got[("mcp_input_answer_seconds_bucket", (("le", "15"),))] == 0
    assert got[("mcp_input_answer_seconds_bucket", (("le", "60"),))] == 1
    assert got[("mcp_workers_alive", ())] == 1
    beat = WorkerHeartbeat.objects.get()
    worker = (("worker", beat.worker),)
    assert got[("mcp_worker_polls_total", worker)] >= 1
    assert ("mcp_worker_poll_errors_total", worker) in got
    assert ("mcp_worker_listen_streams", worker) in got
    assert got[("mcp_worker_schedule_lag_seconds", (("quantile", "0.99"), *worker))] >= 0


def test_healthz_reports_database_channel_layer_and_workers() -> None:
    url = reverse("tasks:healthz")
    anonymous = Client().get(url)
    assert anonymous.status_code == 200
    assert anonymous.json() == {"status": "ok", "failed": []}  # a load balancer: the status only
    viewer = logged_in(person("vera", "viewer"))
    report = viewer.get(url).json()
    assert report["status"] == "ok"
    checks = report["checks"]
    assert checks["database"]["ok"] and checks["database_write"]["ok"] and checks["channel_layer"]["ok"]
    assert checks["workers"] == {**checks["workers"], "ok": False, "alive": 0}
    assert checks["worker_heartbeat"] == {**checks["worker_heartbeat"], "ok": True, "age_seconds": None}

    strict = Client().get(url, {"require": "workers"})
    assert strict.status_code == 503 and strict.json() == {"status": "unavailable", "failed": ["workers"]}

    beat(timezone.now(), lag_p99_ms=3.5)
    healthy = viewer.get(url, {"require": "workers"})
    assert healthy.status_code == 200
    workers = healthy.json()["checks"]["workers"]
    assert workers["alive"] == 1 and workers["schedule_lag_p99_ms"] == 3.5
    assert "host-1" not in healthy.content.decode()  # nothing about the machines behind it
    with override_settings(METRICS_TOKEN=TOKEN):
        scraper = Client().get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert scraper.json()["checks"]["workers"]["alive"] == 1


def beat(at: datetime, **figures: float) -> WorkerHeartbeat:
    return WorkerHeartbeat.objects.create(
        worker=f"host-1:{WorkerHeartbeat.objects.count()}",
        hostname="host-1",
        pid=42,
        started_at=at,
        last_beat_at=at,
        **figures,
    )


def test_healthz_is_503_naming_the_write_when_the_database_refuses_writes() -> None:
    """SELECT 1 still works on a read-only database (after a failover) or a full disk; a write does not."""
    url = reverse("tasks:healthz")
    viewer = logged_in(person("vera", "viewer"))
    assert Client().get(url).status_code == 200
    read_only = (
        "PRAGMA query_only = ON"
        if connection.vendor == "sqlite"
        else "SET default_transaction_read_only = on"
    )
    with connection.cursor() as cursor:
        cursor.execute(read_only)
    try:
        refused = Client().get(url)
        detailed = viewer.get(url).json()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "PRAGMA query_only = OFF"
                if connection.vendor == "sqlite"
                else "RESET default_transaction_read_only"
            )
    assert refused.status_code == 503
    assert refused.json() == {"status": "unavailable", "failed": ["database_write"]}
    assert detailed["checks"]["database"]["ok"] is True
    assert detailed["checks"]["database_write"]["ok"] is False
    assert Client().get(url).status_code == 200  # writable again


def test_healthz_is_503_when_the_workers_stopped_beating() -> None:
    """A worker that cannot write (or hangs) stops beating: three missed beats fail the check; a
    worker gone for over an hour (removed without a clean stop) no longer counts. With
    ?require=workers only: a load balancer keeps the pages."""
    url, strict = reverse("tasks:healthz"), {"require": "workers"}
    beat(timezone.now() - timedelta(seconds=20))  # alive (within the lease) but not beating
    stale = Client().get(url, strict)
    assert stale.status_code == 503 and stale.json()["failed"] == ["worker_heartbeat"]
    report = logged_in(person("vera", "viewer")).get(url).json()["checks"]["worker_heartbeat"]
    assert report["ok"] is False and report["age_seconds"] >= 20
    assert Client().get(url).status_code == 200  # a load balancer's check: the pages still work
    beat(timezone.now())
    assert Client().get(url, strict).status_code == 200  # the newest beat counts: another worker writes
    WorkerHeartbeat.objects.update(last_beat_at=timezone.now() - timedelta(hours=2))
    assert Client().get(url, strict).json()["failed"] == ["workers"]  # gone for long: not alive


def _redis_layer(url: str) -> dict[str, dict[str, object]]:
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}}


@pytest.mark.redis
def test_healthz_round_trips_a_message_through_redis() -> None:
    viewer = logged_in(person("vera", "viewer"))
    with override_settings(CHANNEL_LAYERS=_redis_layer("redis://127.0.0.1:6379")):
        for _ in range(2):  # a second probe on a later event loop works too
            response = viewer.get(reverse("tasks:healthz"))
            assert response.status_code == 200, response.content
            assert response.json()["checks"]["channel_layer"]["backend"] == "RedisChannelLayer"


def test_healthz_is_503_when_the_channel_layer_is_unreachable() -> None:
    viewer = logged_in(person("vera", "viewer"))
    with override_settings(CHANNEL_LAYERS=_redis_layer("redis://127.0.0.1:1")):
        anonymous = Client().get(reverse("tasks:healthz"))
        response = viewer.get(reverse("tasks:healthz"))
    assert anonymous.status_code == 503 and anonymous.json()["failed"] == ["channel_layer"]
    layer = response.json()["checks"]["channel_layer"]
    assert layer["ok"] is False and "127.0.0.1" not in response.content.decode()
