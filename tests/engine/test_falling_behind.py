"""A worker that falls behind its schedule says so: in its heartbeat row, on the overview, in a WARNING."""

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tasksapp import services
from tasksapp.engine.health import MIN_SAMPLES, ScheduleHealth
from tasksapp.models import McpServer, WorkerHeartbeat
from tests.support.engine_helpers import run_worker_until

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


def judge(health: ScheduleHealth, lags_ms: list[float], at: datetime) -> bool:
    for lag in lags_ms:
        health.observe(lag / 1000)
    return health.verdict("w1", at)


def test_behind_when_the_p99_lag_passes_the_threshold_and_back_when_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = ScheduleHealth(threshold_ms=1000)
    assert not judge(health, [5.0] * 200, T0)  # keeping up: nothing to store
    assert health.behind_since is None
    with caplog.at_level(logging.WARNING, logger="tasksapp.engine.health"):
        assert judge(health, [5.0] * 190 + [2500.0] * 10, T0 + timedelta(seconds=5))
    assert health.behind_since == T0 + timedelta(seconds=5)
    assert "lag p99 2.5 s over the last 200 polls (threshold 1.0 s)" in health.note
    assert [r.levelname for r in caplog.records] == ["WARNING"] and "w1 is behind" in caplog.text
    judge(health, [3000.0] * 100, T0 + timedelta(seconds=10))
    assert health.behind_since == T0 + timedelta(seconds=5)  # still behind since then
    assert not judge(health, [3000.0] * (MIN_SAMPLES - 1), T0 + timedelta(seconds=15))  # too few to judge
    assert len(health.lags) == MIN_SAMPLES - 1  # kept: they count with the next beat's
    assert judge(health, [5.0] * 2000, T0 + timedelta(seconds=20))  # 19 late of 2,019: p99 on time
    assert (health.behind_since, health.note) == (None, "")


def test_a_worker_starved_to_a_few_polls_a_beat_still_says_it_is_behind() -> None:
    """The most starved worker polls least: its few late polls add up across beats to a verdict."""
    health = ScheduleHealth(threshold_ms=1000)
    beats = [judge(health, [4000.0] * 5, T0 + timedelta(seconds=second)) for second in range(4)]
    assert beats == [False, False, False, True] and health.behind_since == T0 + timedelta(seconds=3)


@pytest.mark.django_db(transaction=True)
def test_a_worker_behind_schedule_shows_it_on_the_overview(
    demo_registered: McpServer, settings: object
) -> None:
    settings.MCP_WORKER_LAG_P99_MS = 0  # type: ignore[attr-defined]  # every poll starts "late"
    for _ in range(5):  # polled every 100 ms (the fixture's interval; no listen stream)
        arguments = {"n": 100, "delay": 0.1}
        services.call_start(server=demo_registered, tool="slow_count", arguments=arguments, user=None)

    def reported() -> bool:
        return WorkerHeartbeat.objects.filter(behind_since__isnull=False, stopped_at__isnull=True).exists()

    worker = run_worker_until(reported, heartbeat_seconds=1.0, listen=False)
    row = WorkerHeartbeat.objects.get(worker=worker.name)
    assert "polls start late" in row.behind_note and "add a worker" in row.behind_note
    row.stopped_at = None  # the worker stopped with the test; the overview shows live workers' signals
    row.last_beat_at = datetime.now(UTC)
    row.save()
    client = Client()
    client.force_login(User.objects.create_superuser("admin"))
    html = client.get("/").content.decode()
    assert "behind schedule" in html and "polls start late" in html
