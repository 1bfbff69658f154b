"""How a service reaches a server: the one McpClient factory for a registered server, and one
exchange run from synchronous code."""

from collections.abc import Awaitable, Callable

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings

from tasksapp.mcpclient import InputKinds, McpClient, Timeouts
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.models import McpServer
from tasksapp.services.oauth import oauth_for, oauth_mark_needed

# The dashboard has people who can answer all four kinds of input request.
DASHBOARD_INPUT_KINDS = InputKinds(elicitation_form=True, elicitation_url=True, sampling=True, roots=True)


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

    auth = oauth_for(server)  # reads the database: here, before the event loop

    async def run() -> T:
        async with client_for(server, auth) as client:
            return await action(client)

    try:
        return async_to_sync(run)()
    except AuthorizationRequired as exc:
        if server.pk:  # shown on the server page: Connect, or re-authorize for a wider scope
            oauth_mark_needed(server_id=server.pk, exc=exc)
        raise
