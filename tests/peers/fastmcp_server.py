"""A small fastmcp-tasks peer server for interoperability tests.

Run with the peer venv (fastmcp 4.1.4 + fastmcp-tasks 4.1.4, Python 3.12):

    /work/main/.venv-peer/bin/python tests/peers/fastmcp_server.py --host 127.0.0.1 --port PORT

It serves the MCP Streamable HTTP endpoint at ``/mcp`` (revision 2026-07-28, plus the
legacy handshake that fastmcp keeps by default) with the SEP-2663 ``TasksExtension``
on the in-memory Docket backend (``memory://``, no Redis). Once uvicorn really accepts
connections it prints exactly one line to stdout and flushes it:

    fastmcp peer listening on http://HOST:PORT/mcp

SIGTERM and SIGINT shut it down cleanly (uvicorn's graceful shutdown, exit status 0).

A small ASGI wrapper records every POST the server receives, so tests can assert what
actually went over the wire:

* ``GET  /_debug/requests``       JSON list of the last 500 POSTs:
  ``[{"method": <JSON-RPC method or null>, "headers": {lowercased: value}, "body": <JSON>,
  "path": "/mcp"}]`` (``body`` is null and ``raw`` holds the text if it was not JSON)
* ``GET  /_debug/stats``          ``{"methods": {<JSON-RPC method>: count}}`` (all POSTs
  since start or the last clear)
* ``POST /_debug/requests/clear`` empties both; answers ``{"cleared": true}``

Tools (the names and arguments are relied on by other tests):

* ``echo(text)``                  immediate (never a task)
* ``slow_count(n=5, delay=0.3)``  task; statusMessage "counted i/n"; result "counted to n"
* ``ask_name()``                  task; input_required (form: name) -> "Hello, <name>!"
* ``ask_form()``                  task; input_required with a richer form -> echoes answers
* ``fail_tool()``                 task; completed with isError: true (raises ToolError)
* ``fail_rpc()``                  task; failed with an ``error`` object (raises MCPError)
* ``run_forever(interval=0.25)``  task only (mode "required"); works until cancelled

On SIGTERM/SIGINT, running slow_count/run_forever bodies return early (Docket would
otherwise wait for them before the process can exit).

All task tools use TaskConfig mode "optional" (a call without the tasks capability runs
in the foreground) except ``run_forever``, which is "required" (-32021 without the
capability). Every task advertises ``pollIntervalMs`` = POLL_INTERVAL_MS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections import Counter, deque
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import timedelta
from types import FrameType
from typing import Any

import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

POLL_INTERVAL_MS = 250
DEBUG_LIMIT = 500

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TASK = TaskConfig(mode="optional", poll_interval=timedelta(milliseconds=POLL_INTERVAL_MS))
TASK_ONLY = TaskConfig(mode="required", poll_interval=timedelta(milliseconds=POLL_INTERVAL_MS))

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name"}},
    "required": ["name"],
}

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Full name", "minLength": 1, "maxLength": 100},
        "email": {"type": "string", "format": "email", "title": "Email", "description": "Work address"},
        "age": {"type": "integer", "title": "Age", "minimum": 18, "maximum": 130, "default": 30},
        "subscribe": {"type": "boolean", "title": "Subscribe to news", "default": False},
        "plan": {"type": "string", "title": "Plan", "enum": ["free", "pro", "enterprise"], "default": "free"},
    },
    "required": ["name", "email"],
}

OUTCOME = {"decline": "declined", "cancel": "cancelled"}

mcp = FastMCP("fastmcp-peer", instructions="Test peer for the MCP tasks dashboard.")
mcp.add_extension(TasksExtension(url="memory://"))


# Docket drains running tasks before the server can exit, so a task that never ends
# would block shutdown for ever. Tools sleep through nap(), which returns early once a
# shutdown signal has arrived (set from QuietServer.handle_exit).
STOPPING = asyncio.Event()


async def nap(seconds: float) -> bool:
    """Sleep up to `seconds`; return True at once if the server is shutting down."""
    try:
        await asyncio.wait_for(STOPPING.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


def _ask(key: str, message: str, schema: dict[str, Any]) -> InputRequiredResult:
    params = ElicitRequestFormParams(message=message, requested_schema=schema)
    return InputRequiredResult(input_requests={key: ElicitRequest(params=params)})


def _answer(ctx: Context, key: str) -> ElicitResult | None:
    response = (ctx.input_responses or {}).get(key)
    return response if isinstance(response, ElicitResult) else None


@mcp.tool
def echo(text: str) -> str:
    """Return the text unchanged, immediately (never a task)."""
    return text


@mcp.tool(task=TASK)
async def slow_count(ctx: Context, n: int = 5, delay: float = 0.3) -> str:
    """Count to n, one step every `delay` seconds, reporting "counted i/n"."""
    await ctx.report_progress(0, n, f"counted 0/{n}")
    for i in range(1, n + 1):
        if await nap(delay):
            return f"stopped at {i - 1}/{n}: server shutting down"
        await ctx.report_progress(i, n, f"counted {i}/{n}")
    return f"counted to {n}"


@mcp.tool(task=TASK)
async def ask_name(ctx: Context) -> str | InputRequiredResult:
    """Ask for a name mid-task, then greet it."""
    answer = _answer(ctx, "name")
    if answer is None:
        return _ask("name", "Please enter your name.", NAME_SCHEMA)
    if answer.action != "accept":
        return f"Name request {OUTCOME[answer.action]} by the user."
    return f"Hello, {(answer.content or {}).get('name')}!"


@mcp.tool(task=TASK)
async def ask_form(ctx: Context) -> dict[str, Any] | InputRequiredResult:
    """Ask for a contact form mid-task, then echo the answers."""
    answer = _answer(ctx, "contact")
    if answer is None:
        return _ask("contact", "Please fill in your contact details.", FORM_SCHEMA)
    return {"action": answer.action, "answers": answer.content or {}}


@mcp.tool(task=TASK)
async def fail_tool() -> str:
    """Fail at the tool level: the task completes with isError: true."""
    raise ToolError("fail_tool: deliberate tool-level failure")


@mcp.tool(task=TASK)
async def fail_rpc() -> str:
    """Fail at the protocol level: the task ends `failed` with a JSON-RPC error."""
    raise MCPError(
        code=-32603,
        message="fail_rpc: deliberate protocol-level failure",
        data={"retryAfterS": 30},
    )


@mcp.tool(task=TASK_ONLY)
async def run_forever(ctx: Context, interval: float = 0.25) -> str:
    """Keep working (reporting "working: tick i") until the task is cancelled."""
    i = 0
    try:
        while True:
            i += 1
            await ctx.report_progress(i, None, f"working: tick {i}")
            if await nap(interval):
                return f"stopped after {i} ticks: server shutting down"
    except asyncio.CancelledError:
        print(f"run_forever cancelled after {i} ticks", file=sys.stderr, flush=True)
        raise


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
        await self.app(scope, receive, send)

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
        entry: dict[str, Any] = {"method": None, "headers": headers, "body": None, "path": scope["path"]}
        try:
            entry["body"] = json.loads(raw)
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

    loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True
        if self.loop is not None:
            self.loop.call_soon_threadsafe(STOPPING.set)


async def serve(host: str, port: int) -> None:
    app = DebugRecorder(mcp.http_app(path="/mcp"))
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="on", log_level="warning", timeout_graceful_shutdown=2
    )
    server = QuietServer(config)
    server.loop = asyncio.get_running_loop()
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving  # startup failed: surface the error
            raise SystemExit(1)
        await asyncio.sleep(0.01)
    print(f"fastmcp peer listening on http://{host}:{port}/mcp", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
