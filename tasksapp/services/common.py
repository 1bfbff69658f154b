"""What every service shares: its errors, and how it reaches a server."""

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils.translation import gettext as _

from tasksapp.mcpclient import InputKinds, McpClient, McpError, ProtocolError, Timeouts
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.models import Agent, McpServer, OperatorAction, PendingCall, RemoteTask

# The dashboard has people who can answer all four kinds of input request.
DASHBOARD_INPUT_KINDS = InputKinds(elicitation_form=True, elicitation_url=True, sampling=True, roots=True)


class ServiceError(Exception):
    """An action could not be carried out. The message is for the person who asked."""


class NotAllowed(ServiceError):
    """The action does not fit the current state (already answered, already finished, ...)."""


class CallFailed(ServiceError):
    """The server answered, but with something the dashboard cannot record (a reused task id)."""


class NotRecorded(ServiceError):
    """The server did what was asked, but the database could not record it; the message says what."""


class RemoteFailed(ServiceError):
    """The MCP server refused or could not be reached. Nothing was changed locally."""

    def __init__(self, message: str, *, cause: McpError) -> None:
        super().__init__(message)
        self.cause = cause


def refuse_archived(server: McpServer) -> None:
    """Archived servers are kept read-only (issue 12 #10): nothing may be sent to them."""
    if server.archived:
        raise NotAllowed(
            _(
                "Server %(name)s is archived: its tasks and history are read-only. "
                "An admin can un-archive it on the Servers page."
            )
            % {"name": server.name}
        )


def client_for(server: McpServer, auth: "httpx.Auth | None" = None) -> McpClient:
    era = server.era if server.era in ("modern", "legacy") else None
    return McpClient(
        server.url,
        headers=server.headers,
        input_kinds=DASHBOARD_INPUT_KINDS,
        max_body_bytes=settings.MCP_MAX_BODY_BYTES,
        era=era,  # type: ignore[arg-type]
        block_private_addresses=settings.MCP_BLOCK_PRIVATE_ADDRESSES,
        timeouts=server_timeouts(read=server.read_timeout_seconds, call=server.call_timeout_seconds),
        auth=auth,
    )


def server_timeouts(*, read: float, call: float) -> Timeouts:
    """A server's configured timeouts; a request as a whole may always last as long as one silence."""
    return Timeouts(read=read, call=call, request=max(Timeouts().request, read))


def with_client[T](server: McpServer, action: Callable[[McpClient], Awaitable[T]]) -> T:
    """Run one async exchange with the server from synchronous code (views, commands, admin)."""

    from tasksapp.services.oauth import oauth_for  # it builds on this module

    auth = oauth_for(server)  # reads the database: here, before the event loop

    async def run() -> T:
        async with client_for(server, auth) as client:
            return await action(client)

    try:
        return async_to_sync(run)()
    except AuthorizationRequired as exc:
        if server.pk:  # shown on the server page: Connect, or re-authorize for a wider scope
            from tasksapp.services.oauth import oauth_mark_needed

            oauth_mark_needed(server_id=server.pk, exc=exc)
        raise


def describe(exc: McpError) -> str:
    if isinstance(exc, ProtocolError):
        return f"the server answered {exc.code}: {exc.message}"
    return str(exc)


def export_record(*, user: Any, detail: dict[str, Any]) -> None:
    """Audit a download of the task list or the audit log (what, which format, which filters)."""
    audit(user, "export", detail={**detail, "summary": _export_summary(detail)})


def _export_summary(detail: dict[str, Any]) -> str:
    filters = ", ".join(f"{key}={value}" for key, value in detail.get("filters", {}).items())
    return f"{detail.get('what')} as {detail.get('format')}" + (f" ({filters})" if filters else "")


def audit(
    user: Any,
    action: str,
    *,
    server: McpServer | None = None,
    task: RemoteTask | None = None,
    pending: PendingCall | None = None,
    ok: bool = True,
    detail: dict[str, Any] | None = None,
    agent: Agent | None = None,
) -> None:
    """Record an operator's (or an agent's) action in the audit log (inside the caller's
    transaction, if any)."""
    OperatorAction.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        agent=agent,
        action=action,
        server=server or (task.server if task else None),
        task=task,
        pending_call=pending,
        ok=ok,
        detail=detail or {},
    )
