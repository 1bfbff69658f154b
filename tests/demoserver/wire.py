"""A deliberately raw MCP client for the demo server's tests: httpx, JSON and SSE by hand."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

PV = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
ACCEPT = "application/json, text/event-stream"
TERMINAL = ("completed", "failed", "cancelled")
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


# What these tests declare unless they name capabilities: every input kind, as the dashboard does.
ALL_INPUT_KINDS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def envelope(
    *, tasks: bool = True, version: str = PV, declared: dict[str, Any] | None = None, **capabilities: Any
) -> dict[str, Any]:
    """`declared`: exactly these capabilities (besides tasks); else the keyword ones; else every kind."""
    caps: dict[str, Any] = dict(declared if declared is not None else capabilities or ALL_INPUT_KINDS)
    if tasks:
        caps["extensions"] = {TASKS: {}}
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "demoserver-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


@dataclass
class SseEvent:
    comment: str | None = None
    message: dict[str, Any] | None = None


def sse_events(response: httpx.Response) -> Iterator[SseEvent]:
    """Parses an SSE body incrementally: comments and `data:` messages, in wire order."""
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith(":"):
            yield SseEvent(comment=line[1:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield SseEvent(message=json.loads("\n".join(data)))
            data = []


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    return [e.message for e in sse_events(response) if e.message is not None]


class Wire:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url
        self.base = url.rsplit("/mcp", 1)[0]
        self.http = httpx.Client(timeout=timeout)
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def headers(self, method: str, name: str | None = None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": PV,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        return headers

    def message(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        tasks: bool = True,
        declared: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**(params or {}), "_meta": envelope(tasks=tasks, declared=declared)},
        }

    def post(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        tasks: bool = True,
        headers: dict[str, str] | None = None,
        declared: dict[str, Any] | None = None,
    ) -> httpx.Response:
        body = self.message(method, params, tasks=tasks, declared=declared)
        return self.http.post(self.url, json=body, headers={**self.headers(method, name), **(headers or {})})

    def rpc(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        response = self.post(method, params, **kw)
        if response.headers["content-type"].startswith("text/event-stream"):
            return sse_messages(response)[-1]
        payload: dict[str, Any] = response.json()
        return payload

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        reply = self.rpc(method, params, **kw)
        assert "result" in reply, reply
        return reply["result"]

    def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        reply = self.rpc(method, params, **kw)
        assert "error" in reply, reply
        return reply["error"]

    def call(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
        params = {"name": tool, "arguments": arguments or {}}
        return self.result("tools/call", params, name=tool, **kw)

    def start(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        created: dict[str, Any] = self.call(tool, arguments)
        assert created["resultType"] == "task", created
        return created

    def get(self, task_id: str) -> Any:
        return self.result("tasks/get", {"taskId": task_id}, name=task_id)

    def update(self, task_id: str, responses: dict[str, Any]) -> Any:
        params = {"taskId": task_id, "inputResponses": responses}
        return self.result("tasks/update", params, name=task_id)

    def cancel(self, task_id: str) -> Any:
        return self.result("tasks/cancel", {"taskId": task_id}, name=task_id)

    def wait_for(self, task_id: str, *statuses: str, timeout: float = 5.0) -> dict[str, Any]:
        """Polls (faster than advertised, it is a test) until the task reaches a status."""
        deadline = time.monotonic() + timeout
        while True:
            task: dict[str, Any] = self.get(task_id)
            if task["status"] in statuses:
                return task
            assert time.monotonic() < deadline, f"still {task['status']}: {task}"
            time.sleep(0.02)

    def debug(self, path: str, method: str = "GET") -> Any:
        return self.http.request(method, f"{self.base}/_debug/{path}").json()
