"""/healthz: can this process serve, and can the deployment write?

Checks, each {"ok": bool, "ms": float, ...}:
- `database`: a read (SELECT 1);
- `database_write`: a tiny committed write (the `healthz` chore row's time): a database that
  refuses writes (read-only after a failover, a full disk) fails it, where SELECT 1 passed;
- `channel_layer`: a message through this process's channel layer and back;
- `worker_heartbeat`: the newest beat of the workers seen in the last hour that have not stopped
  is younger than three beats (15 s): the workers can write too (passes with no such worker);
- `workers`: how many workers are alive (fails with none).

The last two fail the answer only with `?require=workers`: workers are other processes, and a
load balancer that took every web process out because a worker stopped would make a worker's
fault an outage of the pages.

Anonymous callers (load balancers) get the status and the names of the failed checks; a caller
holding METRICS_TOKEN or signed in with view permission gets every check's figures.
"""

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from tasksapp.engine.store import heartbeat_seconds
from tasksapp.metrics import live_heartbeats
from tasksapp.models import Chore, WorkerHeartbeat

CHANNEL_CHECK_SECONDS = 2.0
RECENT_WORKERS = timedelta(hours=1)  # a worker silent for longer no longer fails the heartbeat check
STALE_BEATS = 3


def health(*, require_workers: bool) -> tuple[bool, dict[str, Any]]:
    """(healthy, report). Nothing in the report is secret: no names, URLs, hosts or errors' details."""
    checks = {
        "database": _timed(_read),
        "database_write": _timed(_write),
        "channel_layer": _timed(_channel_layer),
        "worker_heartbeat": _timed(_heartbeat),
        "workers": _workers(),
    }
    needed = ["database", "database_write", "channel_layer"]
    needed += ["worker_heartbeat", "workers"] if require_workers else []
    failed = [name for name in needed if not checks[name]["ok"]]
    report: dict[str, Any] = {"status": "unavailable" if failed else "ok", "failed": failed, "checks": checks}
    return not failed, report


def public(report: dict[str, Any]) -> dict[str, Any]:
    """What an anonymous caller sees: the status and which checks failed, no figures."""
    return {"status": report["status"], "failed": report["failed"]}


class CheckFailed(Exception):
    def __init__(self, details: dict[str, Any]) -> None:
        super().__init__(details)
        self.details = details


def _timed(check: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        details, ok = check(), True
    except CheckFailed as exc:
        details, ok = exc.details, False
    except Exception as exc:  # a health check reports every failure, whatever it is
        details, ok = {"error": type(exc).__name__}, False
    return {"ok": ok, "ms": round((time.perf_counter() - started) * 1000, 1), **details}


def _read() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"vendor": connection.vendor}


def _write() -> dict[str, Any]:
    with transaction.atomic():  # committed: a refused write fails here (a savepoint inside a test)
        if not Chore.objects.filter(name="healthz").update(last_run_at=timezone.now()):
            Chore.objects.get_or_create(name="healthz", defaults={"last_run_at": timezone.now()})
    return {}


def _channel_layer() -> dict[str, Any]:
    """A message sent to a fresh channel of this process's layer, and received back."""

    async def round_trip() -> None:
        layer = get_channel_layer()
        assert layer is not None, "no channel layer configured"
        channel = await layer.new_channel(prefix=f"healthz.{uuid.uuid4().hex[:8]}")
        await layer.send(channel, {"type": "healthz.ping"})
        async with asyncio.timeout(CHANNEL_CHECK_SECONDS):
            await layer.receive(channel)

    async_to_sync(round_trip)()
    backend = str(settings.CHANNEL_LAYERS["default"]["BACKEND"]).rsplit(".", 1)[-1]
    return {"backend": backend}


def _heartbeat() -> dict[str, Any]:
    now = timezone.now()
    recent = WorkerHeartbeat.objects.filter(stopped_at__isnull=True, last_beat_at__gte=now - RECENT_WORKERS)
    newest = recent.order_by("-last_beat_at").values_list("last_beat_at", flat=True).first()
    if newest is None:
        return {"age_seconds": None}
    age = round((now - newest).total_seconds(), 1)
    if age > STALE_BEATS * heartbeat_seconds():
        raise CheckFailed({"age_seconds": age, "error": "stale"})
    return {"age_seconds": age}


def _workers() -> dict[str, Any]:
    def check() -> dict[str, Any]:
        beats = live_heartbeats()
        lags = [beat.lag_p99_ms for beat in beats if beat.lag_p99_ms is not None]
        return {
            "alive": len(beats),
            "tasks_held": sum(beat.tasks_held for beat in beats),
            "schedule_lag_p99_ms": max(lags) if lags else None,
        }

    result = _timed(check)
    result["ok"] = bool(result["ok"] and result.get("alive"))
    return result
