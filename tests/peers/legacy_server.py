"""A legacy (2025-11-25) MCP peer server, for testing the client's fallback (wire guide §1.4).

Run with its own venv (the official ``mcp`` SDK pinned at 1.30.0, the last 1.x release, whose
newest revision is 2025-11-25; Python 3.12):

    /work/main/.venv-legacy/bin/python tests/peers/legacy_server.py --host 127.0.0.1 --port PORT

The venv is made with:

    $(pyenv root)/versions/3.12.1/bin/python3 -m venv .venv-legacy
    .venv-legacy/bin/pip install 'mcp==1.30.0'

It serves the Streamable HTTP endpoint at ``/mcp`` with the 1.x SDK's FastMCP: stateful
(``initialize`` handshake, ``Mcp-Session-Id``), JSON responses (``json_response=True``), no
``server/discover`` and no SEP-2663 tasks. A request without a session id (such as a modern
``server/discover``) is answered HTTP 400 with JSON-RPC error -32600 "Bad Request: Missing
session ID". Once uvicorn really accepts connections it prints exactly one line to stdout
and flushes it:

    legacy peer listening on http://HOST:PORT/mcp

SIGTERM and SIGINT shut it down cleanly (uvicorn's graceful shutdown, exit status 0).

A small ASGI wrapper records every POST the server receives (the same debug endpoints as
tests/peers/fastmcp_server.py):

* ``GET  /_debug/requests``       JSON list of the last 500 POSTs and DELETEs:
  ``[{"method": <JSON-RPC method or null>, "http": "POST"|"DELETE", "headers": {lowercased: value},
  "body": <JSON>, "path": "/mcp"}]`` (``body`` is null and ``raw`` holds the text if it was not
  JSON; a DELETE also has ``status``, the HTTP status the server answered)
* ``GET  /_debug/stats``          ``{"methods": {<JSON-RPC method>: count}}``
* ``POST /_debug/requests/clear`` empties both; answers ``{"cleared": true}``

Tools: ``echo(text) -> text`` and ``add(a: int, b: int) -> int``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections import Counter, deque
from collections.abc import Awaitable, Callable, MutableMapping
from types import FrameType
from typing import Any

import uvicorn
from mcp.server.fastmcp import FastMCP

DEBUG_LIMIT = 500

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def build_server(host: str, port: int) -> FastMCP:
    # `host` matters: for 127.0.0.1/localhost/::1 the SDK turns on DNS-rebinding protection
    # that accepts only loopback Host/Origin headers.
    mcp = FastMCP(
        "legacy-peer",
        instructions="Legacy (2025-11-25) test peer for the MCP tasks dashboard.",
        host=host,
        port=port,
        streamable_http_path="/mcp",
        json_response=True,
        stateless_http=False,
        log_level="WARNING",
    )

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Return a + b."""
        return a + b

    return mcp


class DebugRecorder:
    """ASGI wrapper: records POST headers and bodies and serves them under /_debug/."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: deque[dict[str, Any]] = deque(maxlen=DEBUG_LIMIT)
        self.methods: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, verb = scope["path"], scope["method"]
        if path.startswith("/_debug/"):
            await self._debug(path, verb, send)
            return
        if verb == "POST":
            receive = await self._record(scope, receive)
        elif verb == "DELETE":
            self._store(scope, b"")
            send = self._noting_status(send)
        await self.app(scope, receive, send)

    def _noting_status(self, send: Send) -> Send:
        """Records the status the server gave a DELETE (200: the session ended)."""
        entry = self.requests[-1]

        async def noted(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        return noted

    async def _record(self, scope: Scope, receive: Receive) -> Receive:
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        self._store(scope, raw)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        return replay

    def _store(self, scope: Scope, raw: bytes) -> None:
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            key, text = name.decode("latin-1").lower(), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        entry: dict[str, Any] = {
            "method": None,
            "http": scope["method"],
            "headers": headers,
            "body": None,
            "path": scope["path"],
        }
        try:
            entry["body"] = json.loads(raw) if raw else None
        except ValueError:
            entry["raw"] = raw.decode("utf-8", "replace")
        if isinstance(entry["body"], dict) and isinstance(entry["body"].get("method"), str):
            entry["method"] = entry["body"]["method"]
            self.methods[entry["method"]] += 1
        self.requests.append(entry)

    async def _debug(self, path: str, verb: str, send: Send) -> None:
        if path == "/_debug/requests" and verb == "GET":
            await _json(send, 200, list(self.requests))
        elif path == "/_debug/stats" and verb == "GET":
            await _json(send, 200, {"methods": dict(self.methods)})
        elif path == "/_debug/requests/clear" and verb == "POST":
            self.requests.clear()
            self.methods.clear()
            await _json(send, 200, {"cleared": True})
        else:
            await _json(send, 404, {"error": "unknown debug endpoint"})


async def _json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class QuietServer(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after a graceful shutdown; exit with 0 instead."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


async def serve(host: str, port: int) -> None:
    app = DebugRecorder(build_server(host, port).streamable_http_app())
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="on", log_level="warning", timeout_graceful_shutdown=2
    )
    server = QuietServer(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving  # startup failed: surface the error
            raise SystemExit(1)
        await asyncio.sleep(0.01)
    print(f"legacy peer listening on http://{host}:{port}/mcp", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
