"""The gateway's side of each upstream server: one McpClient per server per process, built the way
the worker builds its own (the dashboard's credentials, stored headers or OAuth; the same body cap,
timeouts and address policy), and rebuilt when the server's settings change.

What the upstream is told the client can do: what the agent declared, plus, where the server's
policy lets people answer and the agent allows tasks at all, the kinds of input request the
dashboard's people can answer (a task's questions may then wait for them in the inbox).
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from tasksapp.lib import crypto
from tasksapp.mcpclient import McpClient
from tasksapp.mcpclient.wire import TASKS_EXTENSION
from tasksapp.models import McpServer
from tasksapp.services.oauth import worker_auth, worker_oauth
from tasksapp.services.remote import DASHBOARD_INPUT_KINDS, client_for

log = logging.getLogger(__name__)
JsonObject = dict[str, Any]


def upstream_capabilities(agent_declared: JsonObject, *, people_answer: bool) -> JsonObject:
    """The agent's capabilities, widened by what people can answer when they may answer: only on a
    request that allows tasks (a question asked before any task exists goes to the agent, which
    must not be asked for a kind it never declared)."""
    merged = {key: value for key, value in agent_declared.items()}
    extensions = merged.get("extensions")
    if not (
        people_answer and isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)
    ):
        return merged
    for key, value in DASHBOARD_INPUT_KINDS.capabilities().items():
        if key == "extensions":
            continue
        have = merged.get(key)
        merged[key] = {**value, **have} if isinstance(have, dict) else value
    return merged


def signature(server: McpServer) -> tuple[object, ...]:
    """What of a server's row changes the client it is reached through."""
    _, oauth = worker_oauth(server)
    return (
        server.url,
        server.headers_encrypted,
        server.era,
        server.read_timeout_seconds,
        server.call_timeout_seconds,
        *oauth,
    )


@dataclass
class _Entry:
    signature: tuple[object, ...]
    client: McpClient
    in_use: int = 0
    retired: bool = False
    idle: asyncio.Event = field(default_factory=asyncio.Event)


class Upstreams:
    """The clients of this process, one per server; an edited server gets a new one, and the old
    one is closed once the exchanges still on it have ended."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}

    @contextlib.asynccontextmanager
    async def client(self, server: McpServer) -> AsyncIterator[McpClient]:
        entry = await self._entry(server)
        entry.in_use += 1
        try:
            yield entry.client
        finally:
            entry.in_use -= 1
            if entry.retired and entry.in_use == 0:
                await entry.client.aclose()

    async def _entry(self, server: McpServer) -> _Entry:
        wanted = signature(server)
        entry = self._entries.get(server.pk)
        if entry is not None and entry.signature == wanted:
            return entry
        client = await sync_to_async(_build)(server)
        fresh = self._entries[server.pk] = _Entry(wanted, client)
        if entry is not None:
            entry.retired = True
            if entry.in_use == 0:
                await entry.client.aclose()
        return fresh

    async def aclose(self) -> None:
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            await entry.client.aclose()


def _build(server: McpServer) -> McpClient:
    try:
        config, _ = worker_oauth(server)
    except crypto.SecretUnreadable:
        config = None
    auth = worker_auth(server.pk, server.url, config) if config else None
    return client_for(server, auth)
