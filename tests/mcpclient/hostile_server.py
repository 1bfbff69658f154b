"""Misbehaving MCP servers on 127.0.0.1, for faults no real server produces on demand.

`HostileServer` is a real aiohttp.web server on an ephemeral port: every POST is parsed as a
JSON-RPC message (so a script can echo its `id`) and handed to a script that returns whatever
bad answer the test wants. `RawServer` is a bare asyncio socket server for HTTP that aiohttp
refuses to produce (a garbage status line, a body cut short, a server that never answers).

Both answer `server/discover` properly, because the client probes the era before its first
other request; the script's fault therefore hits the method under test.
"""

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Self

from aiohttp import web

TASK_ID = "task-7Qx9"
LISTEN_META = "io.modelcontextprotocol/subscriptionId"

Message = dict[str, Any]
Script = Callable[[web.Request, Message], Awaitable[web.StreamResponse]]
RawScript = Callable[[Message, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

_MISSING = object()
DROP: Any = _MISSING  # pass as a field value to task() to leave the field out

DISCOVERY: Message = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "0.0.1"}},
}


class HostileServer:
    """An aiohttp.web server whose every POST is answered by `script(request, message)`."""

    def __init__(self, script: Script, *, answer_discover: bool = True) -> None:
        self.script = script
        self.answer_discover = answer_discover
        self.messages: list[Message] = []
        self.headers: list[Mapping[str, str]] = []  # case-insensitive, as received
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/mcp", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        message = json.loads(await request.read())
        self.messages.append(message)
        self.headers.append(request.headers.copy())
        if self.answer_discover and message.get("method") == "server/discover":
            return json_reply(response(message, DISCOVERY))
        return await self.script(request, message)


class RawServer:
    """A socket server that reads one HTTP request per connection and lets the script write bytes."""

    def __init__(self, script: RawScript) -> None:
        self.script = script
        self.messages: list[Message] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.url = ""

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        for writer in self._writers:
            writer.transport.abort()
        self._server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1):
                await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            message = json.loads(await reader.readexactly(length))
            self.messages.append(message)
            if message.get("method") == "server/discover":
                body = json.dumps(response(message, DISCOVERY)).encode()
                status = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                writer.write(f"{status}Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
                return
            await self.script(message, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()
            self._writers.discard(writer)


# --- building answers -----------------------------------------------------------------------


def task(**fields: Any) -> Message:
    """A valid working DetailedTask with `fields` laid over it (DROP removes a field)."""
    base: Message = {
        "taskId": TASK_ID,
        "status": "working",
        "statusMessage": "counted 2/5",
        "createdAt": "2026-11-29T23:21:23Z",
        "lastUpdatedAt": "2026-11-29T23:21:25Z",
        "ttlMs": 900000,
        "pollIntervalMs": 1000,
    }
    for key, value in fields.items():
        if value is _MISSING:
            base.pop(key, None)
        else:
            base[key] = value
    return base


def response(message: Message, result: Any) -> Message:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def rpc_error(message: Message, code: Any, text: Any = "boom", data: Any = _MISSING) -> Message:
    error: Message = {"code": code, "message": text}
    if data is not _MISSING:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": message["id"], "error": error}


def json_reply(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return raw_reply(json.dumps(body).encode(), status=status, headers=headers)


def raw_reply(
    body: bytes,
    *,
    status: int = 200,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> web.Response:
    return web.Response(body=body, status=status, headers={"Content-Type": content_type, **(headers or {})})


def sse_event(payload: Any, *, event: str | None = None, eol: bytes = b"\n") -> bytes:
    """One SSE event carrying `payload` (JSON-encoded unless it is already bytes)."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    head = b"event: " + event.encode() + eol if event else b""
    return head + b"data: " + data + eol + eol


async def sse_reply(
    request: web.Request,
    parts: Iterable[bytes | float],
    *,
    end: str = "eof",
    status: int = 200,
) -> web.StreamResponse:
    """Stream `parts` as text/event-stream (a float is a pause in seconds), then end the stream.

    end="eof" finishes the chunked body properly; "abort" drops the TCP connection; "hang"
    keeps the connection open and silent until the client goes away.
    """
    stream = web.StreamResponse(status=status, headers={"Content-Type": "text/event-stream"})
    stream.enable_chunked_encoding()
    await stream.prepare(request)
    for part in parts:
        if isinstance(part, float):
            await asyncio.sleep(part)
        else:
            await stream.write(part)
    if end == "abort":
        assert request.transport is not None
        request.transport.abort()
    elif end == "hang":
        await asyncio.Event().wait()
    return stream


async def ping_forever(request: web.Request, *, every: float = 0.05) -> web.StreamResponse:
    """An SSE stream of keep-alive comments that never carries a message."""
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    while True:
        await stream.write(b": ping\n\n")
        await asyncio.sleep(every)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
