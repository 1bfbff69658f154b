"""The gateway as agents meet it: Daphne serving dashboard.asgi on this test run's database, and
raw JSON-RPC requests with the envelope a 2026-07-28 client sends."""

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from django.conf import settings
from django.db import connection

from tests.peers.launch import ROOT, free_port

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
_ids = itertools.count(1)


def database_url() -> str:
    name = connection.settings_dict["NAME"]
    assert connection.vendor == "sqlite", "the gateway tests run on the SQLite test database"
    return f"sqlite:///{name}"


@contextmanager
def daphne(**extra_env: str) -> Iterator[str]:
    """Daphne with the production ASGI application, on this run's test database; yields its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL")}
    env.update(
        DATABASE_URL=database_url(),
        SECRET_KEY=settings.SECRET_KEY,
        DASHBOARD_ENCRYPTION_KEY=settings.DASHBOARD_ENCRYPTION_KEY,
        PYTHONUNBUFFERED="1",
        **extra_env,
    )
    command = [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "dashboard.asgi:application",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a loaded 2-core machine starts Django slowly
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "daphne did not start"
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def envelope(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": TASKS if capabilities is None else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "gateway-test-agent", "version": "1"},
    }


def headers_for(method: str, params: dict[str, Any], token: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if method in ("tools/call", "prompts/get"):
        headers["Mcp-Name"] = params["name"]
    elif method.startswith("tasks/"):
        headers["Mcp-Name"] = params["taskId"]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def post(
    url: str,
    token: str | None,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    capabilities: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """One JSON-RPC request as a modern client sends it (override any header with `headers`)."""
    params = {**(params or {}), "_meta": envelope(capabilities)}
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    sent = {**headers_for(method, params, token), **(headers or {})}
    return httpx.post(url, json=body, headers=sent, timeout=30)


def result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    message = response.json()
    assert "result" in message, message
    value: dict[str, Any] = message["result"]
    return value


def error(response: httpx.Response) -> dict[str, Any]:
    message = response.json()
    assert "error" in message, message
    value: dict[str, Any] = message["error"]
    return value


def asgi_post(app: Any, headers: list[tuple[bytes, bytes]], body: bytes, path: str) -> tuple[int, Any]:
    """One POST handed to an ASGI application as a server would hand it (for header bytes that
    Daphne's own parser refuses before any application sees them, and other servers may not)."""
    from asgiref.sync import async_to_sync

    scope = {"type": "http", "method": "POST", "path": path, "scheme": "http", "headers": headers}
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async_to_sync(app)(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload) if payload else None
