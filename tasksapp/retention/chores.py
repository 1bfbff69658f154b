"""Chores one worker of several runs now and then, claimed through their Chore row, and what the
overview says about retention."""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, Sum
from django.utils import timezone

from tasksapp.lib.prepared import Prepared
from tasksapp.models import Chore, TaskCount
from tasksapp.retention import purge

log = logging.getLogger(__name__)
PURGE = "purge"
PURGE_EVERY = timedelta(days=1)
PURGE_LEASE = timedelta(hours=1)  # a worker that died mid-purge leaves it to another after this


def claim(name: str, owner: str, *, every: timedelta, lease: timedelta, now: datetime | None = None) -> bool:
    """True when `owner` may run the chore now: it is due (last run `every` ago) and nobody holds it.
    One conditional UPDATE, so of several workers asking at once exactly one gets it."""
    now = now or timezone.now()
    Chore.objects.get_or_create(name=name)
    due = Q(last_run_at__isnull=True) | Q(last_run_at__lte=now - every)
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    won = Chore.objects.filter(due & free, name=name).update(lease_owner=owner, lease_until=now + lease)
    return bool(won)


def finish(name: str, owner: str, result: dict[str, Any]) -> None:
    Chore.objects.filter(name=name, lease_owner=owner).update(
        last_run_at=timezone.now(), last_result=result, lease_owner="", lease_until=None
    )


def purge_if_due(owner: str) -> dict[str, Any] | None:
    """The daily purge, if it is this worker's to run; returns what it deleted (None: not run)."""
    if not claim(PURGE, owner, every=PURGE_EVERY, lease=PURGE_LEASE):
        return None

    def renew() -> None:  # a long purge keeps its lease
        Chore.objects.filter(name=PURGE, lease_owner=owner).update(lease_until=timezone.now() + PURGE_LEASE)

    try:
        done = purge.purge(on_batch=renew).as_dict()
    except BaseException:
        Chore.objects.filter(name=PURGE, lease_owner=owner).update(lease_owner="", lease_until=None)
        raise
    finish(PURGE, owner, done)
    deleted = {kind: n for kind, n in done.items() if kind != "batches" and n}
    log.info("worker %s: purge deleted %s in %d batches", owner, deleted or "nothing", done["batches"])
    return done


def database_bytes() -> int | None:
    """The database's size: SQLite's page_count * page_size, PostgreSQL's pg_database_size."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database())")
        else:
            return None
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


_last_purge = Prepared(
    lambda: Chore.objects.filter(name=PURGE).order_by("pk")[:1], 0
)  # the overview's, per load


def summary() -> dict[str, Any]:
    """What the overview says: how long tasks are kept, how many there are, the database's size,
    and the last purge (two small queries and a pragma, whatever the number of tasks)."""
    last = _last_purge.first() or Chore(name=PURGE)
    return {
        "days": settings.RETAIN_TASKS_DAYS,
        "audit_days": settings.RETAIN_AUDIT_DAYS,
        "tasks": TaskCount.objects.aggregate(n=Sum("n"))["n"] or 0,
        "bytes": database_bytes(),
        "last_purge_at": last.last_run_at,
        "last_purge": last.last_result or {},
    }
