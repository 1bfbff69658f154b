"""Starting tool calls, and finishing the MRTR rounds a server asks for before a task exists."""

from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from tasksapp.mcpclient import CallOutcome, InputRequired, McpClient, McpError, TaskCreated, ToolResult
from tasksapp.models import McpServer, PendingCall, RemoteTask
from tasksapp.services.common import NotAllowed, RemoteFailed, audit, describe, with_client
from tasksapp.services.tasks import task_create

MAX_ROUNDS = 10


@dataclass(frozen=True)
class CallStarted:
    """What came of a tools/call: exactly one of result, pending or task is set."""

    outcome: Literal["result", "input_required", "task"]
    result: dict[str, Any] | None = None
    pending: PendingCall | None = None
    task: RemoteTask | None = None


def call_start(*, server: McpServer, tool: str, arguments: dict[str, Any], user: Any) -> CallStarted:
    """tools/call, handling all three outcomes. A task is persisted before this returns."""
    if not server.enabled:
        raise NotAllowed(f"Server {server.name} is disabled.")

    async def send(client: McpClient) -> CallOutcome:
        return await client.call_tool(tool, arguments)

    try:
        outcome = with_client(server, send)
    except McpError as exc:
        audit(user, "start", server=server, ok=False, detail={"tool": tool, "error": describe(exc)})
        raise RemoteFailed(f"{tool} could not be started: {describe(exc)}", cause=exc) from exc
    return _settle(server, tool, arguments, outcome, user, pending=None)


def pending_call_answer(*, pending: PendingCall, responses: dict[str, Any], user: Any) -> CallStarted:
    """Retry the original call with inputResponses and the echoed requestState, once."""
    claimed = PendingCall.objects.filter(pk=pending.pk, state="open").update(state="sending")
    if not claimed:
        raise NotAllowed("This call was already answered; nothing was sent.")
    pending.refresh_from_db()
    request_state = pending.request_state

    async def send(client: McpClient) -> CallOutcome:
        return await client.call_tool(
            pending.tool_name, pending.arguments, input_responses=responses, request_state=request_state
        )

    try:
        outcome = with_client(pending.server, send)
    except McpError as exc:
        state = "failed" if getattr(exc, "code", None) == -32602 else "open"
        PendingCall.objects.filter(pk=pending.pk).update(state=state, last_error=describe(exc))
        audit(
            user, "answer", pending=pending, server=pending.server, ok=False, detail={"error": describe(exc)}
        )
        raise RemoteFailed(f"The answer was not accepted: {describe(exc)}", cause=exc) from exc
    return _settle(pending.server, pending.tool_name, pending.arguments, outcome, user, pending=pending)


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
