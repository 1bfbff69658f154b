"""What the worker writes to the mirror from a server's answer, and what it reads off a snapshot:
the database steps (run as `db(step)(...)`, off the event loop) and small pure helpers."""

import time
from datetime import UTC, datetime

from tasksapp import services
from tasksapp.mcpclient import DetailedTask, InvalidResponse, TransportError
from tasksapp.models import RemoteTask

# A server change older than this at commit, or newer by more than the tolerance, says the server's
# clock is off (or the change is a catch-up after an outage): it is left out of the mirror lag.
MIRROR_LAG_MAX_SECONDS = 600.0
CLOCK_TOLERANCE_SECONDS = 1.0


def apply_snapshots(items: list[tuple[int, DetailedTask]], source: str) -> list[bool]:
    """Each (task id, snapshot) through the service; whether it changed the row, in order."""
    # The service re-reads the row under a lock; an unsaved instance carrying the pk is enough.
    # Each snapshot is its own transaction, as when they were written one step each.
    return [
        services.task_apply_snapshot(task=RemoteTask(pk=pk), snapshot=snapshot, source=source)
        for pk, snapshot in items
    ]


def expire(pk: int, reason: str) -> None:
    services.task_mark_expired(task=RemoteTask(pk=pk), reason=reason)


def record_error(pk: int, error: str) -> None:
    services.task_record_error(task=RemoteTask(pk=pk), error=error)


def server_lag(snapshot: DetailedTask) -> float | None:
    """Seconds from the server's change (its lastUpdatedAt) to now, the mirror commit; None when the
    server's clock cannot be trusted for it (ahead of ours beyond the tolerance, or absurdly old)."""
    try:
        changed = datetime.fromisoformat(snapshot.last_updated_at)
    except (TypeError, ValueError):
        return None
    if changed.tzinfo is None:
        changed = changed.replace(tzinfo=UTC)
    lag = time.time() - changed.timestamp()
    if lag < -CLOCK_TOLERANCE_SECONDS or lag > MIRROR_LAG_MAX_SECONDS:
        return None
    return max(lag, 0.0)


def ttl_deadline(snapshot: DetailedTask) -> float | None:
    """When (wall-clock seconds) the snapshot's TTL runs out, counted from its createdAt."""
    try:
        created = datetime.fromisoformat(snapshot.created_at)
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created.timestamp() + (snapshot.ttl_ms or 0) / 1000


def what_went_wrong(exc: TransportError) -> str:
    """What a person reads in the expiry note: unreachable only when it was."""
    if isinstance(exc, InvalidResponse):
        return f"the server answered wrongly ({exc})"
    if exc.status is not None:
        return f"the server answered HTTP {exc.status} ({exc})"
    return f"the server was unreachable ({exc})"
