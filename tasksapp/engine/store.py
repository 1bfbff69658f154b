"""The worker's database side: leases, loading what it holds, heartbeats. Synchronous; the engine
calls these (and the services it writes through) as `db(step)(...)`, off the event loop.
Several workers may run these at once on PostgreSQL."""

import math
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, DateTimeField, F, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from tasksapp.engine.tracking import TrackedTask
from tasksapp.lib import crypto
from tasksapp.lib.connections import db_step
from tasksapp.mcpclient.oauth import ClientConfig
from tasksapp.models import McpServer, RemoteTask, WorkerHeartbeat
from tasksapp.services.health import server_health_forget, worker_views
from tasksapp.services.oauth import worker_oauth
from tasksapp.services.tasks import stored_fingerprint

CLAIM_BATCH = 2000
ID_CHUNK = 2000  # ids per IN (...) list: well inside SQLite's limit on query parameters
SHARE_SLACK = 1  # a worker may hold one task above its fair share, so a new task never waits for one


@dataclass(frozen=True)
class ServerRow:
    pk: int
    name: str
    url: str
    headers: dict[str, str]
    signature: tuple[object, ...]
    era: str
    listen_wanted: bool
    failing: bool
    read_timeout_seconds: float
    call_timeout_seconds: float
    oauth: ClientConfig | None = None  # the server's OAuth client settings
    others_success_at: datetime | None = None  # the newest answer another worker got from it
    others_failing: bool = False  # it fails for another worker


def db[**P, R](fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` run off the event loop on the shared database thread, on a live connection
    (tasksapp.lib.connections.db_step), with its parameters and return type kept."""
    step: Callable[P, Awaitable[R]] = db_step(fn)
    return step


def lease_span() -> timedelta:
    return timedelta(seconds=settings.MCP_LEASE_SECONDS)


def enabled_servers(worker: str) -> dict[int, ServerRow]:
    """The servers to poll and listen to: enabled and not archived (an archived one is never polled),
    with this worker's view of their health and the newest answer another worker got."""
    rows: dict[int, ServerRow] = {}
    servers = list(McpServer.objects.watched().select_related("authorization"))
    views = worker_views(worker, [server.pk for server in servers])
    for server in servers:
        try:
            headers = server.headers
            oauth, oauth_signature = worker_oauth(server)
        except crypto.SecretUnreadable:
            continue  # reported on the server page; its tasks wait until the key is fixed
        rows[server.pk] = ServerRow(
            pk=server.pk,
            name=server.name,
            url=server.url,
            headers=headers,
            signature=(
                server.url,
                server.headers_encrypted,
                server.era,
                server.read_timeout_seconds,
                server.call_timeout_seconds,
                *oauth_signature,
            ),
            oauth=oauth,
            era=server.era,
            failing=views[server.pk].failing,
            others_success_at=views[server.pk].others_success_at,
            others_failing=views[server.pk].others_failing,
            read_timeout_seconds=server.read_timeout_seconds,
            call_timeout_seconds=server.call_timeout_seconds,
            listen_wanted=server.era == "modern"
            and server.tasks_supported
            and server.listen_supported is not False,
        )
    return rows


def claim(worker: str, held: int) -> set[int]:
    """Take up to this worker's fair share of free tasks; returns the ids newly leased.

    The fair share is the active tasks divided by the live workers, so two workers split the
    load instead of the first one taking everything. SKIP LOCKED keeps concurrent claimers apart,
    and the conditional UPDATE keeps them apart where the database has no row locks (SQLite).
    """
    now = timezone.now()
    wanted = min(fair_share(worker) + SHARE_SLACK - held, CLAIM_BATCH)
    if wanted <= 0:
        return set()
    with transaction.atomic():
        free = (
            RemoteTask.objects.leasable(now)
            .select_for_update(skip_locked=True)
            .order_by("id")
            .values_list("id", flat=True)[:wanted]
        )
        ids = list(free)
        RemoteTask.objects.leasable(now).filter(id__in=ids).update(
            leased_by=worker, lease_until=now + lease_span()
        )
    return set(RemoteTask.objects.filter(id__in=ids, leased_by=worker).values_list("id", flat=True))


def fair_share(worker: str) -> int:
    """Active tasks divided by the live workers (this one included), rounded up.

    Live here means it beat within three heartbeats: a frozen worker stops counting well before
    its leases lapse, so the others take on the new tasks it can no longer claim.
    """
    since = timezone.now() - min(lease_span(), 3 * heartbeat_span())
    live = WorkerHeartbeat.objects.filter(stopped_at__isnull=True, last_beat_at__gte=since)
    workers = live.exclude(worker=worker).count() + 1
    return math.ceil(RemoteTask.objects.active().count() / workers)


def renew(worker: str, ids: set[int]) -> set[int]:
    """Extend the leases of the tasks this process holds (not others held under the same name);
    returns those of them that are still active and still ours."""
    until = timezone.now() + lease_span()
    kept: set[int] = set()
    ordered = sorted(ids)
    for start in range(0, len(ordered), ID_CHUNK):
        chunk = ordered[start : start + ID_CHUNK]
        RemoteTask.objects.filter(leased_by=worker, id__in=chunk).update(lease_until=until)
        mine = RemoteTask.objects.active().filter(leased_by=worker, id__in=chunk)
        kept.update(mine.values_list("id", flat=True))
    return kept


def confirm(confirmed: dict[int, datetime]) -> None:
    """Record when the server last vouched for these tasks (a poll or push answered), changed or not.

    One UPDATE per chunk each heartbeat, never one per poll; each task gets the time of its answer,
    to the second (never later than it), not the time of the flush: a task page must not say
    "not confirmed since" a moment after its server began failing. A change writes it at once
    through the services, and the flush never moves it back.
    """
    ordered = sorted(confirmed)
    for start in range(0, len(ordered), ID_CHUNK):
        chunk = ordered[start : start + ID_CHUNK]
        seconds: dict[datetime, list[int]] = {}
        for pk in chunk:
            seconds.setdefault(confirmed[pk].replace(microsecond=0), []).append(pk)
        stamp = Case(
            *(When(id__in=pks, then=Value(at)) for at, pks in seconds.items()),
            output_field=DateTimeField(),
        )
        # Never back in time: a change written meanwhile stamped its own (exact) confirmation.
        later = Greatest(Coalesce(F("last_confirmed_at"), stamp), stamp)
        RemoteTask.objects.filter(id__in=chunk).update(last_confirmed_at=later)


def stamp_polled(polled: dict[int, datetime]) -> None:
    """When the server last vouched for each of these gateway tasks, exactly (the gateway answers
    agents from the mirror while this is recent: tasksapp/gateway/mirror.py)."""
    items = sorted(polled.items())
    for start in range(0, len(items), ID_CHUNK):
        chunk = dict(items[start : start + ID_CHUNK])
        stamp = Case(
            *(When(pk=pk, then=Value(at, output_field=DateTimeField())) for pk, at in chunk.items()),
            default=F("last_polled_at"),
        )
        RemoteTask.objects.filter(id__in=chunk).update(last_polled_at=stamp)


def adopt(worker: str) -> set[int]:
    """At start: the active tasks a predecessor under the same name still holds, leased anew.

    A supervisor restarting `--name host-1` would otherwise leave them to lapse, or, worse, keep
    renewing leases on tasks nobody polls.
    """
    held = RemoteTask.objects.active().filter(leased_by=worker)
    held.update(lease_until=timezone.now() + lease_span())
    return set(held.values_list("id", flat=True))


def heartbeat_span() -> timedelta:
    return timedelta(seconds=heartbeat_seconds())


def heartbeat_seconds() -> float:
    """How often a worker beats: well inside the lease window that others judge it by."""
    return min(5.0, float(settings.MCP_LEASE_SECONDS) / 3)


def release(worker: str, ids: list[int] | None = None) -> None:
    """Give tasks back (all of them at shutdown) so another worker can take them at once."""
    leased = RemoteTask.objects.filter(leased_by=worker)
    if ids is not None:
        leased = leased.filter(id__in=ids)
    leased.update(leased_by="", lease_until=None)


def load_tasks(ids: set[int]) -> list[TrackedTask]:
    """What the worker keeps in memory for each task it holds; all of them due for a poll now."""
    tracked = []
    columns = (
        "id",
        "server_id",
        "remote_id_encrypted",
        "status",
        "status_message",
        "ttl_ms",
        "poll_interval_ms",
        "remote_created_at",
        "agent_id",
    )
    for task in RemoteTask.objects.filter(id__in=ids).only(*columns):
        try:
            remote_id = task.remote_id
        except crypto.SecretUnreadable:
            continue
        deadline = task.ttl_deadline
        tracked.append(
            TrackedTask(
                pk=task.pk,
                server_id=task.server_id,
                remote_id=remote_id,
                fingerprint=stored_fingerprint(task),
                poll_interval_ms=task.poll_interval_ms,
                ttl_deadline=deadline.timestamp() if deadline else None,
                gateway=task.agent_id is not None,
            )
        )
    return tracked


def worker_name(requested: str | None) -> str:
    return requested or f"{socket.gethostname()}:{os.getpid()}"


def heartbeat(
    worker: str,
    *,
    started: datetime,
    held: int,
    polls: int,
    pushes: int,
    streams: int,
    errors: int = 0,
    lag_ms: tuple[float, float, float] | None = None,
    mirror_ms: tuple[float, float, float] | None = None,
    push_ms: tuple[float, float] | None = None,
    by_path: dict[str, int] | None = None,
) -> None:
    """Record this worker as alive, with its figures for /metrics (counters since it started;
    `lag_ms` is (p50, p99, max) of the scheduling lag since the previous beat: None, without polls
    since then, keeps the previous figures; `mirror_ms` the same of server change -> mirror commit,
    `push_ms` (p50, p99) of push received -> commit, kept likewise; `by_path` the changes written
    since start by how they came: push, poll, safety_net)."""
    figures: dict[str, object] = {
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": started,
        "last_beat_at": timezone.now(),
        "stopped_at": None,
        "tasks_held": held,
        "polls": polls,
        "pushes": pushes,
        "streams_open": streams,
        "poll_errors": errors,
    }
    if lag_ms is not None:
        figures["lag_p50_ms"], figures["lag_p99_ms"], figures["lag_max_ms"] = lag_ms
    if mirror_ms is not None:
        figures["mirror_p50_ms"], figures["mirror_p99_ms"], figures["mirror_max_ms"] = mirror_ms
    if push_ms is not None:
        figures["push_p50_ms"], figures["push_p99_ms"] = push_ms
    for path, count in (by_path or {}).items():
        figures[f"changes_{path}"] = count
    WorkerHeartbeat.objects.update_or_create(worker=worker, defaults=figures)


def heartbeat_health(worker: str, *, behind_since: datetime | None, note: str) -> None:
    """Whether the worker keeps up with its schedule (tasksapp.engine.health), for the overview."""
    WorkerHeartbeat.objects.filter(worker=worker).update(behind_since=behind_since, behind_note=note[:300])


def heartbeat_stop(worker: str) -> None:
    """The worker stopped (after giving its leases back): its views of the servers no longer count."""
    WorkerHeartbeat.objects.filter(worker=worker).update(stopped_at=timezone.now())
    server_health_forget(worker=worker)
