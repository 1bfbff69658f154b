"""Server health, per (worker, server), and the worst of it on the server's row.

Each worker keeps its own back-off in memory and records its view here (ServerHealth). The
McpServer row carries the worst view of the live workers — failures, back-off, since when, who is
behind — so that badges, filters and notifications read one row; a worker's recovery never hides
another's back-off. A task is stale when the worker holding it is failing on its server
(RemoteTask.stale_since), so a flip of one worker's view re-renders that worker's tasks.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from tasksapp import events
from tasksapp.models import McpServer, RemoteTask, ServerHealth, WorkerHeartbeat

# A healthy worker re-records its last answer this often, or every SUCCESS_REFRESH_FAILING while
# the server fails for another worker (whose back-off ends at such a fresh answer: engine.servers).
SUCCESS_REFRESH = timedelta(seconds=30)
SUCCESS_REFRESH_FAILING = timedelta(seconds=5)
HELD_PUBLISH_LIMIT = 500  # the newest tasks of one worker re-rendered when its view flips


def server_record_success(*, server_id: int, worker: str, now: datetime) -> None:
    """This worker reached the server: its failure streak ends. The worker calls it on recovery and
    every SUCCESS_REFRESH (SUCCESS_REFRESH_FAILING while another worker fails there): what other
    workers read as a fresh success. Called more often, it writes nothing."""
    with transaction.atomic():
        if not _lock(server_id):
            return
        row, created = ServerHealth.objects.get_or_create(server_id=server_id, worker=worker)
        recovered = row.consecutive_failures > 0 or row.failing_since is not None
        fresh = row.last_success_at is not None and now - row.last_success_at < SUCCESS_REFRESH_FAILING
        if fresh and not (created or recovered):
            return
        row.consecutive_failures, row.failing_since, row.backoff_until = 0, None, None
        row.last_success_at = now
        row.save(update_fields=["consecutive_failures", "failing_since", "backoff_until", "last_success_at"])
        _refresh(server_id, now)
        events.publish_server_changed(server_id)
        if recovered:
            _publish_held(server_id, worker)  # their stale marks go


def server_record_failure(
    *, server_id: int, worker: str, error: str, failures: int, backoff_until: datetime
) -> None:
    """This worker could not reach the server (`failures` in a row) and waits until `backoff_until`."""
    now = timezone.now()
    with transaction.atomic():
        if not _lock(server_id):
            return
        row, _ = ServerHealth.objects.get_or_create(server_id=server_id, worker=worker)
        began = row.failing_since is None
        row.consecutive_failures, row.backoff_until = failures, backoff_until
        row.failing_since = row.failing_since or now
        row.last_error, row.last_error_at = error[:2000], now
        row.save()
        _refresh(server_id, now)
        events.publish_server_changed(server_id)
        if began:
            _publish_held(server_id, worker)  # open pages mark them stale


def server_health_forget(*, worker: str) -> None:
    """A worker stopped (its leases are given back): its views no longer count."""
    now = timezone.now()
    for server_id in ServerHealth.objects.filter(worker=worker).values_list("server_id", flat=True):
        with transaction.atomic():
            if _lock(server_id):
                ServerHealth.objects.filter(server_id=server_id, worker=worker).delete()
                if _refresh(server_id, now):
                    events.publish_server_changed(server_id)


@dataclass(frozen=True)
class WorkerView:
    """What one worker knows of the others' views of a server (tasksapp.engine.store)."""

    failing: bool  # this worker's own view
    others_success_at: datetime | None  # the newest answer another worker got
    others_failing: bool  # the server fails for another worker


def worker_views(worker: str, server_ids: list[int]) -> dict[int, WorkerView]:
    """Per server: whether this worker's own view is failing, and when another worker last got an
    answer from it (a worker in back-off retries at once after such a success)."""
    own: dict[int, bool] = {}
    others: dict[int, datetime] = {}
    others_failing: set[int] = set()
    rows = ServerHealth.objects.filter(server_id__in=server_ids).values_list(
        "server_id", "worker", "consecutive_failures", "last_success_at"
    )
    for server_id, name, failures, success in rows:
        if name == worker:
            own[server_id] = failures > 0
            continue
        if failures:
            others_failing.add(server_id)
        if success is not None and (server_id not in others or success > others[server_id]):
            others[server_id] = success
    return {pk: WorkerView(own.get(pk, False), others.get(pk), pk in others_failing) for pk in server_ids}


# --- the worst of the live views ---------------------------------------------------------------


def _lock(server_id: int) -> bool:
    """Serialise the views' writers on the server's row: each recomputes the worst from what the
    others committed. False when the server is gone."""
    return McpServer.objects.select_for_update().filter(pk=server_id).exists()


def _refresh(server_id: int, now: datetime) -> bool:
    """Write the worst of the live workers' views onto the server; True when it changed.

    Views of workers that stopped or stopped beating do not count (a stopped worker's are deleted;
    a vanished one's once it holds no task there). With no live view at all the row keeps the
    last word it had."""
    rows = list(ServerHealth.objects.filter(server_id=server_id))
    dead = _dead({row.worker for row in rows}, now)
    _drop_idle_dead(server_id, dead)
    live = [row for row in rows if row.worker not in dead]
    if not live:
        return False
    server = McpServer.objects.get(pk=server_id)
    worst = _worst(live, server)
    changed = {name: value for name, value in worst.items() if getattr(server, name) != value}
    if changed:
        McpServer.objects.filter(pk=server_id).update(**changed)
    return bool(changed)


def _worst(live: list[ServerHealth], server: McpServer) -> dict[str, object]:
    failing = [row for row in live if row.consecutive_failures]
    errors = [(row.last_error_at, row.last_error) for row in live if row.last_error_at is not None]
    latest_error = max(errors, default=None)
    successes = [row.last_success_at for row in live if row.last_success_at is not None]
    return {
        "consecutive_failures": max((row.consecutive_failures for row in failing), default=0),
        "failing_since": min((row.failing_since for row in failing if row.failing_since), default=None),
        "backoff_until": max((row.backoff_until for row in failing if row.backoff_until), default=None),
        "failing_workers": sorted(row.worker for row in failing),
        "workers_reporting": len(live),
        "last_success_at": max(successes, default=server.last_success_at),
        "last_error": latest_error[1] if latest_error else server.last_error,
        "last_error_at": latest_error[0] if latest_error else server.last_error_at,
    }


def _dead(workers: set[str], now: datetime) -> set[str]:
    """Of these workers, those known to have stopped or to have missed their lease window. A worker
    with no heartbeat row yet counts as live."""
    lapsed = now - timedelta(seconds=settings.MCP_LEASE_SECONDS)
    stopped = Q(stopped_at__isnull=False) | Q(last_beat_at__lt=lapsed)
    return set(WorkerHeartbeat.objects.filter(stopped, worker__in=workers).values_list("worker", flat=True))


def _drop_idle_dead(server_id: int, dead: set[str]) -> None:
    """Views of dead workers that hold no task on the server any more are of no use to anyone."""
    if not dead:
        return
    holding = set(
        RemoteTask.objects.filter(server_id=server_id, leased_by__in=dead).values_list("leased_by", flat=True)
    )
    ServerHealth.objects.filter(server_id=server_id, worker__in=dead - holding).delete()


def _publish_held(server_id: int, worker: str) -> None:
    """Re-render the newest active tasks this worker holds on the server: their stale marks follow
    its view. Bounded; an open task list gets one mark for all of them (tasksapp/live/pages.py)."""
    held = RemoteTask.objects.active().filter(server_id=server_id, leased_by=worker).order_by("-id")
    for task_id in held.values_list("id", flat=True)[:HELD_PUBLISH_LIMIT]:
        events.publish_task_changed(task_id)
