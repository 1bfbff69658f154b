"""How the dashboard reaches a server: the one McpClient factory (the worker's clients too), and
one exchange run from synchronous code."""

from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings

from tasksapp.mcpclient import InputKinds, McpClient, Timeouts
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.models import McpServer
from tasksapp.services.oauth import oauth_for, oauth_mark_needed

# The dashboard has people who can answer all four kinds of input request.
DASHBOARD_INPUT_KINDS = InputKinds(elicitation_form=True, elicitation_url=True, sampling=True, roots=True)


class ServerSettings(Protocol):
    """What a client is built from: a server's row (McpServer), or the worker's copy of it read
    off the event loop (engine.store.ServerRow)."""

    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def era(self) -> str: ...
    @property
    def read_timeout_seconds(self) -> float: ...
    @property
    def call_timeout_seconds(self) -> float: ...


def client_for(
    server: ServerSettings,
    auth: "httpx.Auth | None" = None,
    *,
    user_agent: str | None = None,
    transport: "httpx.AsyncBaseTransport | None" = None,
) -> McpClient:
    """The one McpClient factory: a registered server's client, as the dashboard configures it
    (the input kinds its people answer, the body cap, the address policy, the server's URL,
    headers, era and timeouts). `user_agent` goes before the server's own headers, which win."""
    headers = {"User-Agent": user_agent, **server.headers} if user_agent else server.headers
    era = server.era
    return McpClient(
        server.url,
        headers=headers,
        input_kinds=DASHBOARD_INPUT_KINDS,
        max_body_bytes=settings.MCP_MAX_BODY_BYTES,
        era=era if era in ("modern", "legacy") else None,  # type: ignore[arg-type]
        transport=transport,
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
