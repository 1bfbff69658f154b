"""Writing the task mirror: creating tasks, applying what a server said, expiry, cancel."""

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext, pgettext

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient import (
    CompletedTask,
    DetailedTask,
    FailedTask,
    InputRequiredTask,
    McpClient,
    McpError,
)
from tasksapp.mcpclient import (
    InputRequest as InputRequestSpec,
)
from tasksapp.models import Agent, InputRequest, McpServer, RemoteTask, TaskEvent
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed, RemoteFailed, describe, refuse_archived
from tasksapp.services.remote import with_client
from tasksapp.services.timeline import timeline_record

MAX_STATUS_MESSAGE = 4000
Fingerprint = tuple[str, str, int | None, int | None, tuple[str, ...]]
_SECRET_KEYS = ("taskId", "inputRequests", "result", "error")
_SNAPSHOT_FIELDS = [
    "status",
    "status_message",
    "created_at_raw",
    "updated_at_raw",
    "remote_created_at",
    "remote_updated_at",
    "ttl_ms",
    "poll_interval_ms",
    "raw",
    "last_seen_at",
    "last_seen_via",
    "last_confirmed_at",
    "result",
    "is_tool_error",
    "error",
    "finished_at",
    "last_error",
]


def task_create(
    *,
    server: McpServer,
    snapshot: DetailedTask,
    tool_name: str,
    arguments: dict[str, Any],
    user: Any,
    agent: Agent | None = None,
) -> RemoteTask:
    """Persist a task the moment its CreateTaskResult arrives: a lost task id is gone for good."""
    with transaction.atomic():
        task = RemoteTask(
            server=server, tool_name=tool_name, arguments=arguments, started_by=user, agent=agent
        )
        task.set_remote_id(snapshot.task_id)
        _copy_snapshot(task, snapshot, "create")
        task.save()
        _sync_input_requests(task, snapshot)
        timeline_record(task=task, source="create", message_only=False)
        events.publish_task_changed(task.pk, inbox=isinstance(snapshot, InputRequiredTask))
    return task


def task_adopt(*, server: McpServer, task_id: str, tool_name: str, user: Any) -> RemoteTask:
    """Add a task the dashboard did not record (its database was down when the task was started):
    tasks/get confirms the server knows it, then it is mirrored like any other."""
    known = RemoteTask.objects.filter(server=server, remote_id_hash__in=crypto.fingerprints(task_id)).first()
    if known is not None:
        raise NotAllowed(f"The dashboard already has this task: #{known.pk}.")

    async def get(client: McpClient) -> DetailedTask:
        return await client.get_task(task_id)

    try:
        snapshot = with_client(server, get)
    except McpError as exc:
        raise RemoteFailed(f"{server.name} does not confirm that task: {describe(exc)}", cause=exc) from exc
    with transaction.atomic():
        task = task_create(server=server, snapshot=snapshot, tool_name=tool_name, arguments={}, user=user)
        task_note(task=task, source="operator", note=f"adopted by {user or 'the command line'}")
        audit(user, "start", task=task, detail={"tool": tool_name, "outcome": "adopted"})
    return task


def task_apply_snapshot(*, task: RemoteTask, snapshot: DetailedTask, source: str) -> bool:
    """Bring the mirror up to date with one tasks/get answer or push. Idempotent and monotonic.

    Returns True when something changed (and was written); a re-polled snapshot writes nothing,
    and a task that already reached a terminal state never leaves it.
    """
    with transaction.atomic():
        task = RemoteTask.objects.select_for_update().get(pk=task.pk)
        if task.is_terminal or task.expired or _older(task, snapshot) or not _differs(task, snapshot):
            return False
        status_changed = (task.status, task.status_message) != (
            snapshot.status,
            bounded_message(snapshot.status_message),
        )
        inputs_before = task.status == "input_required"
        same_status = task.status == snapshot.status
        _copy_snapshot(task, snapshot, source)
        task.last_error = ""
        task.save(update_fields=_SNAPSHOT_FIELDS)
        inputs_changed = (inputs_before or snapshot.status == "input_required") and _sync_input_requests(
            task, snapshot
        )
        if status_changed:
            timeline_record(task=task, source=source, message_only=same_status)
        events.publish_task_changed(
            task.pk, inbox=inputs_changed or inputs_before != (snapshot.status == "input_required")
        )
    return True


def task_mark_expired(*, task: RemoteTask, reason: str) -> bool:
    """The server no longer knows the task. Keep its last result and history; stop watching it."""
    with transaction.atomic():
        task = RemoteTask.objects.select_for_update().get(pk=task.pk)
        if task.is_terminal or task.expired:
            return False
        task.expired, task.expired_at = True, timezone.now()
        task.last_error = reason
        task.save(update_fields=["expired", "expired_at", "last_error"])
        _close_open_inputs(task)
        task_note(task=task, source="local", note=f"expired: {reason}")
        events.publish_task_changed(task.pk, inbox=True)
    return True


def task_record_error(*, task: RemoteTask, error: str) -> None:
    """A poll of this task failed in a way that concerns only this task (bad answer, -32603)."""
    with transaction.atomic():
        updated = RemoteTask.objects.filter(pk=task.pk).exclude(last_error=error).update(last_error=error)
        if updated:
            events.publish_task_changed(task.pk)


def task_cancel(*, task: RemoteTask, user: Any) -> RemoteTask:
    """Send tasks/cancel. The task shows 'cancel requested' until the server reports a terminal state.

    The request is recorded before it is sent, so the timeline reads in the order things happened
    even when the server confirms at once; a refused send takes the record back.
    """
    task.refresh_from_db()
    refuse_archived(task.server)
    if task.is_terminal or task.expired:
        raise NotAllowed(
            gettext("Task #%(pk)s has already finished (%(status)s); nothing to cancel.")
            % {"pk": task.pk, "status": pgettext("task status", task.display_status)}
        )
    remote_id, _ = task.remote_id, task.server.headers  # an unreadable secret stops here, before any record
    with transaction.atomic():
        first = RemoteTask.objects.filter(pk=task.pk, cancel_requested_at__isnull=True).update(
            cancel_requested_at=timezone.now()
        )
        event = task_note(
            task=task, source="operator", note=f"cancel requested by {user or 'the command line'}"
        )
        events.publish_task_changed(task.pk)

    async def send(client: McpClient) -> None:
        await client.cancel_task(remote_id)

    try:
        with_client(task.server, send)
    except McpError as exc:
        with transaction.atomic():
            event.delete()
            if first:
                RemoteTask.objects.filter(pk=task.pk).update(cancel_requested_at=None)
            audit(user, "cancel", task=task, ok=False, detail={"error": describe(exc)})
            events.publish_task_changed(task.pk)
        raise RemoteFailed(
            gettext("Could not cancel: %(error)s") % {"error": describe(exc)}, cause=exc
        ) from exc
    with transaction.atomic():
        audit(user, "cancel", task=task)
        events.nudge_workers(task.pk)
    task.refresh_from_db()
    return task


def task_note(*, task: RemoteTask, source: str, note: str) -> TaskEvent:
    """A timeline entry for something the dashboard or an operator did; the status stays the server's.

    The status is the mirror's as it is now, read under the task's lock, never the caller's copy: a
    push that landed while an answer was being sent must not be followed by an entry that says
    "input required" again (the lifecycle bar would show a second wait that never happened).
    """
    with transaction.atomic():
        status, message = (
            RemoteTask.objects.select_for_update()
            .filter(pk=task.pk)
            .values_list("status", "status_message")
            .get()
        )
        return TaskEvent.objects.create(
            task=task, status=status, status_message=message, source=source, note=note[:500]
        )


# --- helpers ------------------------------------------------------------------------------


def bounded_message(message: str | None) -> str:
    """The statusMessage as the mirror stores it (servers are untrusted: bound what they send)."""
    text = message or ""
    return text if len(text) <= MAX_STATUS_MESSAGE else text[: MAX_STATUS_MESSAGE - 1] + "…"


def snapshot_fingerprint(snapshot: DetailedTask) -> Fingerprint:
    """What counts as a change. Not lastUpdatedAt: fastmcp-tasks moves it on every poll (§10 #7)."""
    keys = tuple(sorted(snapshot.input_requests)) if isinstance(snapshot, InputRequiredTask) else ()
    return (
        snapshot.status,
        bounded_message(snapshot.status_message),
        snapshot.ttl_ms,
        snapshot.poll_interval_ms,
        keys,
    )


def stored_fingerprint(task: RemoteTask) -> Fingerprint | None:
    """The fingerprint of what the mirror holds, or None where input keys make it unknowable cheaply."""
    if task.status == "input_required":
        return None
    return (task.status, task.status_message, task.ttl_ms, task.poll_interval_ms, ())


def _older(task: RemoteTask, snapshot: DetailedTask) -> bool:
    """A snapshot the server stamped before the one the mirror holds: a poll overtaken by a push.

    A tasks/get sent just before an answer can come back after the push that reported the answer
    taken; applying it would put the task back to "input required" for one poll interval. A
    terminal snapshot is never stale (nothing follows it), and an unparseable stamp is no evidence.
    """
    if snapshot.is_terminal or task.remote_updated_at is None:
        return False
    stamped = _parse_time(snapshot.last_updated_at)
    return stamped is not None and stamped < task.remote_updated_at


def _differs(task: RemoteTask, snapshot: DetailedTask) -> bool:
    """What counts as a change: everything but lastUpdatedAt, which some servers move on every poll."""
    if (task.status, task.status_message, task.ttl_ms, task.poll_interval_ms) != (
        snapshot.status,
        bounded_message(snapshot.status_message),
        snapshot.ttl_ms,
        snapshot.poll_interval_ms,
    ):
        return True
    if isinstance(snapshot, InputRequiredTask):
        rows = dict(task.input_requests.values_list("key_hash", "state"))
        listed = set(crypto.stored_fingerprints(snapshot.input_requests, rows).values())
        still_open = {key_hash for key_hash, state in rows.items() if state == "open"}
        unrecorded = set() if task.input_requests_capped_at else listed - rows.keys()  # capped: ignored
        return bool(unrecorded or still_open - listed)
    return False


def _copy_snapshot(task: RemoteTask, snapshot: DetailedTask, source: str) -> None:
    now = timezone.now()
    task.status = snapshot.status
    task.status_message = bounded_message(snapshot.status_message)
    task.created_at_raw = snapshot.created_at[:64]
    task.updated_at_raw = snapshot.last_updated_at[:64]
    task.remote_created_at = _parse_time(snapshot.created_at)
    task.remote_updated_at = _parse_time(snapshot.last_updated_at)
    task.ttl_ms, task.poll_interval_ms = snapshot.ttl_ms, snapshot.poll_interval_ms
    task.raw = {k: v for k, v in snapshot.raw.items() if k not in _SECRET_KEYS}
    task.last_seen_at, task.last_seen_via, task.last_confirmed_at = now, source, now
    if isinstance(snapshot, CompletedTask):
        task.result, task.is_tool_error = snapshot.result.raw, snapshot.result.is_error
    if isinstance(snapshot, FailedTask):
        task.error = snapshot.error.raw
    if snapshot.is_terminal:
        task.finished_at = now


def _sync_input_requests(task: RemoteTask, snapshot: DetailedTask) -> bool:
    """One row per (task, key); keys the server no longer lists are closed. True if any row changed.

    At most MCP_MAX_INPUT_REQUESTS_PER_TASK rows are ever recorded for a task: the first key
    beyond that flags it in its timeline, and newer keys are not recorded (those already recorded
    can still be answered)."""
    wanted = snapshot.input_requests if isinstance(snapshot, InputRequiredTask) else {}
    known = set(task.input_requests.values_list("key_hash", flat=True))
    hashes = crypto.stored_fingerprints(wanted, known)  # rows written before a key change match too
    by_hash = {hashes[key]: (key, request) for key, request in wanted.items()}
    new = [(key, request) for key_hash, (key, request) in by_hash.items() if key_hash not in known]
    created = _record_inputs(task, new)
    closed = (
        task.input_requests.filter(state="open")
        .exclude(key_hash__in=by_hash)
        .update(state="gone", closed_at=timezone.now())
    )
    return bool(created or closed)


def _record_inputs(task: RemoteTask, new: list[tuple[str, InputRequestSpec]]) -> int:
    """Rows for new keys, as many as the task's life still allows; the first time some are left
    out, the task is flagged. Returns how many were recorded."""
    room = max(0, settings.MCP_MAX_INPUT_REQUESTS_PER_TASK - task.input_requests_recorded)
    rows = []
    for key, request in new[:room]:
        row = InputRequest(task=task, method=request.method[:100], params=request.params)
        row.set_key(key)
        rows.append(row)
    InputRequest.objects.bulk_create(rows)
    if rows:
        task.input_requests_recorded += len(rows)
        RemoteTask.objects.filter(pk=task.pk).update(
            input_requests_recorded=F("input_requests_recorded") + len(rows)
        )
    if len(new) > room and task.input_requests_capped_at is None:
        _cap_input_requests(task)
    return len(rows)


def _cap_input_requests(task: RemoteTask) -> None:
    task.input_requests_capped_at = timezone.now()
    RemoteTask.objects.filter(pk=task.pk).update(input_requests_capped_at=task.input_requests_capped_at)
    limit = settings.MCP_MAX_INPUT_REQUESTS_PER_TASK
    task_note(
        task=task,
        source="local",
        note=(
            f"The server asked for more than {limit} inputs over this task's life: it misbehaves, so newer "
            "questions are not recorded (those already here can still be answered)."
        ),
    )


def _close_open_inputs(task: RemoteTask) -> None:
    task.input_requests.filter(state="open").update(state="gone", closed_at=timezone.now())


def _parse_time(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
