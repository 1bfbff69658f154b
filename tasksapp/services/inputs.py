"""Answering what servers ask: a task's inputRequests (tasks/update) and MRTR rounds (PendingCall)."""

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient import McpClient, McpError
from tasksapp.models import InputRequest, RemoteTask
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed, RemoteFailed, describe, refuse_archived
from tasksapp.services.remote import with_client
from tasksapp.services.tasks import task_note

# The three elicitation actions stay apart: "cancel" (dismissed, no choice made) is not "decline".
AUDITED_ACTIONS = {"decline": "decline", "cancel": "answer_cancel"}
ACTION_VERBS = {"answer": "answered", "decline": "declined", "answer_cancel": "cancelled"}


def task_answer(*, task: RemoteTask, key: str, response: dict[str, Any], user: Any) -> InputRequest:
    """Send one answer with tasks/update, exactly once however many people press the button.

    The row moves open -> sending in one conditional UPDATE, so of two concurrent answers only
    one wins and sends; the other gets NotAllowed. A failed send puts the row back to open.
    """
    refuse_archived(task.server)
    refuse_agents_own(task)
    request = InputRequest.objects.filter(task=task, key_hash__in=crypto.fingerprints(key)).first()
    if request is None:
        raise NotAllowed(_("This input request is unknown for this task."))
    claimed = InputRequest.objects.filter(pk=request.pk, state="open").update(
        state="sending", response=response, answered_by=user, answered_at=timezone.now(), last_error=""
    )
    if not claimed:
        raise NotAllowed(_already(request))
    action = AUDITED_ACTIONS.get(str(response.get("action")), "answer")
    try:
        _send_update(task, key, response)
    except McpError as exc:
        InputRequest.objects.filter(pk=request.pk, state="sending").update(
            state="open", last_error=describe(exc)
        )
        audit(user, action, task=task, ok=False, detail={"method": request.method, "error": describe(exc)})
        events.publish_task_changed(task.pk, inbox=True)
        raise RemoteFailed(
            _("The answer was not delivered: %(error)s") % {"error": describe(exc)}, cause=exc
        ) from exc
    with transaction.atomic():
        InputRequest.objects.filter(pk=request.pk).update(state="answered", sent_at=timezone.now())
        verb = ACTION_VERBS[action]
        task_note(task=task, source="operator", note=f"{user or 'the command line'} {verb} {request.method}")
        audit(user, action, task=task, detail={"method": request.method, "action": response.get("action")})
        events.publish_task_changed(task.pk, inbox=True)
        events.nudge_workers(task.pk)
    request.refresh_from_db()
    return request


def refuse_agents_own(task: RemoteTask) -> None:
    """A gateway task whose server (or tool) policy is `agent`: only the agent answers its questions."""
    if task.agent_id is not None and task.server.input_policy(task.tool_name) == "agent":
        raise NotAllowed(
            _(
                "Agent %(agent)s answers this task's questions (the server's gateway policy); "
                "an admin can change that on the server's page."
            )
            % {"agent": task.agent}
        )


def input_resend_stuck(*, older_than_seconds: float) -> int:
    """Re-send answers whose sender died between claiming and sending (tasks/update is idempotent)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    resent = 0
    for request in InputRequest.objects.filter(state="sending", answered_at__lt=cutoff).select_related(
        "task__server"
    ):
        try:
            _send_update(request.task, request.key, request.response or {})
        except McpError as exc:
            InputRequest.objects.filter(pk=request.pk).update(last_error=describe(exc))
            continue
        InputRequest.objects.filter(pk=request.pk, state="sending").update(
            state="answered", sent_at=timezone.now()
        )
        resent += 1
    return resent


def input_prune_gone(*, older_than_seconds: float) -> int:
    """Delete the requests that servers replaced or withdrew (state "gone") more than this long ago;
    returns how many. Until then they stay, for the notifications' per-task digest to count."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    stale = Q(closed_at__lt=cutoff) | Q(closed_at__isnull=True)
    deleted, _ = InputRequest.objects.filter(stale, state="gone").delete()
    return deleted


def _send_update(task: RemoteTask, key: str, response: dict[str, Any]) -> None:
    remote_id = task.remote_id

    async def send(client: McpClient) -> None:
        await client.update_task(remote_id, {key: response})

    with_client(task.server, send)


def _already(request: InputRequest) -> str:
    request.refresh_from_db()
    if request.state in ("answered", "sending"):
        if request.answered_by_agent:
            return _("Agent %(who)s already answered this request; nothing was sent.") % {
                "who": request.answered_by_agent
            }
        if request.answered_by:
            return _("%(who)s already answered this request; nothing was sent.") % {
                "who": request.answered_by
            }
        return _("Someone already answered this request; nothing was sent.")
    return _("The server no longer waits for this answer; nothing was sent.")
