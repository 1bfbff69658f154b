"""Deleting what is older than the retention settings, in short batches (`manage.py purge`, and
the worker once a day through tasksapp.retention.chores).

Each kind has its setting (days; 0 keeps it forever): finished tasks with their events and input
requests (RETAIN_TASKS_DAYS, counted from when the task ended), audit rows (RETAIN_AUDIT_DAYS),
notification outbox rows that were sent or given up (RETAIN_OUTBOX_DAYS) and sessions expired
that long ago (RETAIN_SESSIONS_DAYS). A task is purged only once it has ended (completed, failed,
cancelled or expired) and has no open input request; a running task never is.

Every batch is one short transaction of at most RETAIN_BATCH rows (a task's events and input
requests go first, in batches of their own), with no network I/O, so no lock is held for long
and the worker and the pages carry on meanwhile. The triggers on tasksapp_remotetask keep the
overview's counts and the search index right as tasks go (tasksapp.counts, tasksapp.search).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from tasksapp.models import TERMINAL, InputRequest, NotificationOutbox, OperatorAction, RemoteTask, TaskEvent
from tasksapp.sessions import HashedSession

OnBatch = Callable[[], None] | None
KINDS = ("tasks", "events", "input_requests", "audit", "outbox", "sessions")
OPEN_INPUT = ("open", "sending")


@dataclass
class Purged:
    """Rows deleted (or, for a dry run, that would be) per kind, and the batches it took."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    batches: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts, "batches": self.batches}


def cutoff(days: int, now: datetime) -> datetime | None:
    return now - timedelta(days=days) if days else None


def finished_tasks(before: datetime) -> "QuerySet[RemoteTask]":
    """Tasks that ended before `before` (finished, or found expired) with no open input request."""
    ended = Q(status__in=TERMINAL, finished_at__lt=before) | Q(expired=True, expired_at__lt=before)
    waiting = InputRequest.objects.filter(state__in=OPEN_INPUT).values("task_id")
    return RemoteTask.objects.filter(ended).exclude(pk__in=waiting)


def querysets(now: datetime) -> dict[str, "QuerySet[Any]"]:
    """What each setting lets go, as of `now` (kinds kept forever are left out)."""
    found: dict[str, QuerySet[Any]] = {}
    if when := cutoff(settings.RETAIN_TASKS_DAYS, now):
        tasks = finished_tasks(when)
        found["tasks"] = tasks
        found["events"] = TaskEvent.objects.filter(task__in=tasks)
        found["input_requests"] = InputRequest.objects.filter(task__in=tasks)
    if when := cutoff(settings.RETAIN_AUDIT_DAYS, now):
        found["audit"] = OperatorAction.objects.filter(created_at__lt=when)
    if when := cutoff(settings.RETAIN_OUTBOX_DAYS, now):
        done = (NotificationOutbox.State.SENT, NotificationOutbox.State.FAILED)
        found["outbox"] = NotificationOutbox.objects.filter(state__in=done, created_at__lt=when)
    if when := cutoff(settings.RETAIN_SESSIONS_DAYS, now):
        found["sessions"] = HashedSession.objects.filter(expire_date__lt=when)
    return found


def count(now: datetime | None = None) -> Purged:
    """What a purge would delete now (the dry run)."""
    found = Purged()
    for kind, rows in querysets(now or timezone.now()).items():
        found.counts[kind] = rows.count()
    return found


def purge(now: datetime | None = None, *, batch: int | None = None, on_batch: OnBatch = None) -> Purged:
    """Delete everything past its retention, RETAIN_BATCH rows per transaction."""
    size = batch or settings.RETAIN_BATCH
    done = Purged()
    now = now or timezone.now()
    found = querysets(now)
    if "tasks" in found:
        _tasks(found["tasks"], size, done, on_batch)
    for kind in ("audit", "outbox", "sessions"):
        if kind in found:
            _rows(kind, found[kind], size, done, on_batch)
    return done


def _tasks(tasks: "QuerySet[RemoteTask]", size: int, done: Purged, on_batch: OnBatch) -> None:
    while ids := list(tasks.values_list("pk", flat=True)[:size]):
        _rows("events", TaskEvent.objects.filter(task_id__in=ids), size, done, on_batch)
        _rows("input_requests", InputRequest.objects.filter(task_id__in=ids), size, done, on_batch)
        with transaction.atomic():
            # Asked again inside the transaction: a task that was answered or moved since stays.
            still = tasks.filter(pk__in=ids)
            deleted = still.delete()[1]
        done.counts["tasks"] += deleted.get(RemoteTask._meta.label, 0)
        done.counts["events"] += deleted.get(TaskEvent._meta.label, 0)
        done.counts["input_requests"] += deleted.get(InputRequest._meta.label, 0)
        _batched(done, on_batch)
        if len(ids) < size:
            break


def _rows(kind: str, rows: "QuerySet[Any]", size: int, done: Purged, on_batch: OnBatch) -> None:
    model = rows.model
    while ids := list(rows.values_list("pk", flat=True)[:size]):
        with transaction.atomic():
            deleted = model.objects.filter(pk__in=ids).delete()[1]
        done.counts[kind] += deleted.get(model._meta.label, 0)
        _batched(done, on_batch)
        if len(ids) < size:
            break


def _batched(done: Purged, on_batch: OnBatch) -> None:
    done.batches += 1
    if on_batch is not None:
        on_batch()
