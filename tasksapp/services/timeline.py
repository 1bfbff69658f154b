"""A task's timeline, bounded whatever a server sends.

A server decides how often its statusMessage changes (a flood once made 3,000 events in 20 s), so:
a change of message alone is folded into the previous event when that one is less than
MCP_TIMELINE_COALESCE_MS old (the latest message kept, `merged` counting the ones it replaced),
and a task keeps at most MCP_TIMELINE_MAX_EVENTS events: the oldest go, summed up in one
"trimmed" row that sorts where they were. The first event (the creation) always stays.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from tasksapp.models import RemoteTask, TaskEvent

FOLDABLE = (TaskEvent.Source.POLL, TaskEvent.Source.PUSH)


def timeline_record(*, task: RemoteTask, source: str, message_only: bool) -> TaskEvent | None:
    """Record the task's current status and message; returns the new event, or None if folded.

    Call inside the transaction that saved the task.
    """
    now = timezone.now()
    if message_only and _fold(task, now):
        return None
    event = TaskEvent.objects.create(
        task=task,
        status=task.status,
        status_message=task.status_message,
        source=source,
        remote_updated_at=task.updated_at_raw,
        observed_at=now,
    )
    timeline_trim(task=task)
    return event


def timeline_trim(*, task: RemoteTask) -> int:
    """Keep at most MCP_TIMELINE_MAX_EVENTS events; returns how many were removed.

    Over the cap, the timeline goes down to 90% of it in one step, so a long task pays for a
    trim once every tenth of the cap rather than on every event.
    """
    cap = settings.MCP_TIMELINE_MAX_EVENTS
    events = TaskEvent.objects.filter(task=task)
    total = events.count()
    if total <= cap:
        return 0
    first = events.order_by("observed_at", "id").values_list("id", flat=True).first()
    assert first is not None  # total > cap >= 10
    summary = events.filter(source=TaskEvent.Source.TRIMMED).first()
    kept_after = max(1, cap * 9 // 10 - 2)  # besides the first event and the summary
    older = events.exclude(pk=first).exclude(source=TaskEvent.Source.TRIMMED).order_by("observed_at", "id")
    doomed = list(older[: max(0, older.count() - kept_after)])
    if not doomed:
        return 0
    if summary is None:
        summary = TaskEvent(task=task, source=TaskEvent.Source.TRIMMED, observed_at=doomed[0].observed_at)
    summary.merged += sum(1 + event.merged for event in doomed)
    last = doomed[-1]
    summary.status, summary.status_message = last.status, last.status_message
    summary.note = _summary_note(summary.merged, summary.observed_at, last.observed_at, cap)
    summary.save()
    TaskEvent.objects.filter(pk__in=[event.pk for event in doomed]).delete()
    return len(doomed)


def _fold(task: RemoteTask, now: datetime) -> bool:
    """Fold the new message into the task's latest event if it is a recent message-only one."""
    window = timedelta(milliseconds=settings.MCP_TIMELINE_COALESCE_MS)
    latest = TaskEvent.objects.filter(task=task).order_by("-observed_at", "-id").first()
    if latest is None or latest.source not in FOLDABLE or latest.note or latest.status != task.status:
        return False
    if now - latest.observed_at >= window:
        return False
    TaskEvent.objects.filter(pk=latest.pk).update(
        status_message=task.status_message, remote_updated_at=task.updated_at_raw, merged=F("merged") + 1
    )
    return True


def _summary_note(count: int, since: datetime, until: datetime, cap: int) -> str:
    local = timezone.localtime
    return (
        f"{count} older events removed ({local(since):%Y-%m-%d %H:%M:%S} to {local(until):%H:%M:%S}): a task "
        f"keeps at most {cap} (MCP_TIMELINE_MAX_EVENTS). The last of them is shown here."
    )
