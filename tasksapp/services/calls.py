"""Starting tool calls, and finishing the MRTR rounds a server asks for before a task exists."""

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from tasksapp.lib import crypto
from tasksapp.lib.connections import CONNECTION_LOST, drop_connections, in_transaction
from tasksapp.mcpclient import (
    CallOutcome,
    InputRequired,
    McpClient,
    McpError,
    TaskCreated,
    ToolResult,
    TransportError,
)
from tasksapp.models import McpServer, PendingCall, RemoteTask
from tasksapp.services.audit import audit
from tasksapp.services.errors import (
    CallFailed,
    NotAllowed,
    NotRecorded,
    RemoteFailed,
    describe,
    refuse_archived,
)
from tasksapp.services.remote import with_client
from tasksapp.services.tasks import task_create

MAX_ROUNDS = 10
RECORD_RETRY_PAUSES = (0.5, 2.0)  # with the pool's own wait for a connection, ~30 s in all
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallStarted:
    """What came of a tools/call: exactly one of result, pending or task is set."""

    outcome: Literal["result", "input_required", "task"]
    result: dict[str, Any] | None = None
    pending: PendingCall | None = None
    task: RemoteTask | None = None


def call_start(*, server: McpServer, tool: str, arguments: dict[str, Any], user: Any) -> CallStarted:
    """tools/call, handling all three outcomes. A task is persisted before this returns."""
    refuse_archived(server)
    if not server.enabled:
        raise NotAllowed(_("Server %(name)s is disabled.") % {"name": server.name})

    schema = server.stored_input_schema(tool)

    async def send(client: McpClient) -> CallOutcome:
        return await client.call_tool(tool, arguments, input_schema=schema)

    began = time.monotonic()
    try:
        outcome = with_client(server, send)
    except McpError as exc:
        error = describe(exc)
        if isinstance(exc, TransportError) and time.monotonic() - began >= server.call_timeout_seconds - 1:
            error = (
                f"{server.name} did not answer within its call timeout of {server.call_timeout_seconds} s; "
                "the tool may still be running there. An administrator can raise the call timeout on "
                "the server's settings page."
            )
        audit(user, "start", server=server, ok=False, detail={"tool": tool, "error": error})
        raise RemoteFailed(
            _("%(tool)s could not be started: %(error)s") % {"tool": tool, "error": error}, cause=exc
        ) from exc
    return _record(server, tool, arguments, outcome, user, pending=None)


def pending_call_answer(*, pending: PendingCall, responses: dict[str, Any], user: Any) -> CallStarted:
    """Retry the original call with inputResponses and the echoed requestState, once."""
    refuse_archived(pending.server)
    pending_calls_expire()
    claimed = PendingCall.objects.filter(pk=pending.pk, state="open").update(state="sending")
    if not claimed:
        state = PendingCall.objects.filter(pk=pending.pk).values_list("state", flat=True).first()
        raise NotAllowed(_refusal(state))
    pending.refresh_from_db()
    request_state = pending.request_state
    schema = pending.server.stored_input_schema(pending.tool_name)

    async def send(client: McpClient) -> CallOutcome:
        return await client.call_tool(
            pending.tool_name,
            pending.arguments,
            input_responses=responses,
            request_state=request_state,
            input_schema=schema,
        )

    try:
        outcome = with_client(pending.server, send)
    except McpError as exc:
        state = "failed" if getattr(exc, "code", None) == -32602 else "open"
        PendingCall.objects.filter(pk=pending.pk).update(state=state, last_error=describe(exc))
        audit(
            user, "answer", pending=pending, server=pending.server, ok=False, detail={"error": describe(exc)}
        )
        raise RemoteFailed(
            _("The answer was not accepted: %(error)s") % {"error": describe(exc)}, cause=exc
        ) from exc
    return _record(pending.server, pending.tool_name, pending.arguments, outcome, user, pending=pending)


def pending_call_dismiss(*, pending: PendingCall, user: Any) -> None:
    """Close a call's questions unanswered. Nothing is sent: the server keeps no state between MRTR
    rounds, so the call simply never goes on. Audited."""
    with transaction.atomic():
        closed = PendingCall.objects.filter(pk=pending.pk, state="open").update(state="dismissed")
        if not closed:
            state = PendingCall.objects.filter(pk=pending.pk).values_list("state", flat=True).first()
            raise NotAllowed(_refusal(state))
        audit(
            user,
            "answer_cancel",
            server=pending.server,
            pending=pending,
            detail={"tool": pending.tool_name, "outcome": "dismissed"},
        )


def pending_calls_expire(*, now: datetime | None = None) -> int:
    """Mark open calls nobody answered within MCP_PENDING_CALL_TTL_SECONDS expired (the inbox and its
    count leave them out from that moment either way); returns how many."""
    since = (now or timezone.now()) - timedelta(seconds=settings.MCP_PENDING_CALL_TTL_SECONDS)
    return PendingCall.objects.filter(state="open", updated_at__lt=since).update(state="expired")


def _refusal(state: str | None) -> str:
    if state == "expired":
        return _("Nobody answered in time, so this question expired; nothing was sent. Start the call again.")
    if state == "dismissed":
        return _("This question was dismissed; nothing was sent. Start the call again to answer it.")
    return _("This call was already answered; nothing was sent.")


def _record(
    server: McpServer,
    tool: str,
    arguments: dict[str, Any],
    outcome: CallOutcome,
    user: Any,
    *,
    pending: PendingCall | None,
) -> CallStarted:
    """Write what the server answered. The answer exists only in this process now: a lost database
    connection is replaced and the write retried (never the tools/call), and if the database stays
    away the person is told the task id, so the task can still be found."""
    for pause in (*RECORD_RETRY_PAUSES, None):
        try:
            return _settle(server, tool, arguments, outcome, user, pending=pending)
        except IntegrityError as exc:
            if not isinstance(outcome, TaskCreated) or not _known(server, outcome.task.task_id):
                raise
            _refuse_reused_id(server, tool, outcome.task.task_id, user, pending, exc)
        except CONNECTION_LOST as exc:
            if pause is None or in_transaction():
                raise NotRecorded(_not_recorded(server, tool, outcome, exc)) from exc
            log.warning("recording %s on %s: database connection lost (%s); retrying", tool, server.name, exc)
            drop_connections()
            time.sleep(pause)
    raise AssertionError("unreachable")


def _known(server: McpServer, task_id: str) -> RemoteTask | None:
    return RemoteTask.objects.filter(server=server, remote_id_hash__in=crypto.fingerprints(task_id)).first()


def _refuse_reused_id(
    server: McpServer, tool: str, task_id: str, user: Any, pending: PendingCall | None, exc: Exception
) -> None:
    """A server gave a new call a task id it already used: keep the first task, record this call
    as failed, and say so (never a 500, never a task that silently replaces another)."""
    existing = _known(server, task_id)
    earlier = f"task #{existing.pk} ({existing.tool_name})" if existing else "an earlier task"
    message = (
        f"{server.name} answered this call with a task id it had already given to {earlier}. "
        "The call was not recorded as a new task; the earlier task is unchanged. "
        "The server is reusing task ids: tell its maintainers."
    )
    with transaction.atomic():
        if pending is not None:
            PendingCall.objects.filter(pk=pending.pk).update(state="failed", last_error=message)
        action = "answer" if pending else "start"
        audit(user, action, server=server, pending=pending, ok=False, detail={"tool": tool, "error": message})
    raise CallFailed(message) from exc


def _not_recorded(server: McpServer, tool: str, outcome: CallOutcome, exc: Exception) -> str:
    what = "answered"
    if isinstance(outcome, TaskCreated):
        what = f"started task {outcome.task.task_id}"
        log.error(
            "task %s (%s on %s) was started but could not be recorded",
            outcome.task.task_id,
            tool,
            server.name,
        )
    return (
        f"{server.name} {what} for {tool}, but the dashboard's database is unreachable ({exc}), so it "
        "could not be recorded. Do not run the tool again: once the database is back, "
        f"`manage.py tasks adopt {server.name} TASK_ID` adds the task to the dashboard."
    )


def _settle(
    server: McpServer,
    tool: str,
    arguments: dict[str, Any],
    outcome: CallOutcome,
    user: Any,
    *,
    pending: PendingCall | None,
) -> CallStarted:
    action = "answer" if pending else "start"
    with transaction.atomic():
        if isinstance(outcome, TaskCreated):
            task = task_create(
                server=server, snapshot=outcome.task, tool_name=tool, arguments=arguments, user=user
            )
            _finish(pending, task=task)
            audit(user, action, task=task, pending=pending, detail={"tool": tool, "outcome": "task"})
            return CallStarted(outcome="task", task=task)
        if isinstance(outcome, ToolResult):
            _finish(pending, result=outcome.raw)
            audit(user, action, server=server, pending=pending, detail={"tool": tool, "outcome": "result"})
            return CallStarted(outcome="result", result=outcome.raw)
        assert isinstance(outcome, InputRequired)
        pending = _next_round(server, tool, arguments, outcome, user, pending)
        audit(
            user, action, server=server, pending=pending, detail={"tool": tool, "outcome": "input_required"}
        )
        return CallStarted(outcome="input_required", pending=pending)


def _next_round(
    server: McpServer,
    tool: str,
    arguments: dict[str, Any],
    outcome: InputRequired,
    user: Any,
    pending: PendingCall | None,
) -> PendingCall:
    if pending is None:
        pending = PendingCall(server=server, tool_name=tool, arguments=arguments, created_by=user, rounds=0)
    pending.rounds += 1
    pending.input_requests = {key: request.raw for key, request in outcome.input_requests.items()}
    pending.request_state = outcome.request_state
    pending.state = "open" if pending.rounds <= MAX_ROUNDS else "failed"
    pending.last_error = "" if pending.state == "open" else f"the server asked more than {MAX_ROUNDS} rounds"
    pending.save()
    return pending


def _finish(pending: PendingCall | None, *, task: RemoteTask | None = None, result: Any = None) -> None:
    if pending is not None:
        pending.state, pending.task, pending.result, pending.last_error = "done", task, result, ""
        pending.save()
