"""The `/_debug/*` endpoints: what the server received, and a way to end listen streams."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .asgi import Headers, Scope, Send, send_bytes, send_json, send_text

REQUEST_LOG_SIZE = 500


class RequestLog:
    """The last requests POSTed to /mcp, as the peer sent them, plus per-method counts."""

    def __init__(self) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_SIZE)
        self.methods: Counter[str] = Counter()
        self.pollers: dict[str, Counter[str]] = {}

    def record(self, headers: Headers, body: Any) -> None:
        method = body.get("method") if isinstance(body, dict) else None
        if isinstance(method, str):
            self.methods[method] += 1
        if method == "tasks/get":
            task_id = str(body.get("params", {}).get("taskId", ""))
            agent = headers.as_dict().get("user-agent", "")
            self.pollers.setdefault(task_id, Counter())[agent] += 1
        self._entries.append({"method": method, "headers": headers.as_dict(), "body": body})

    def entries(self) -> list[dict[str, Any]]:
        return list(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.methods.clear()
        self.pollers.clear()


class DebugEndpoints:
    def __init__(
        self,
        log: RequestLog,
        stats: Callable[[], Mapping[str, Any]],
        close_streams: Callable[[], int],
    ) -> None:
        self._log = log
        self._stats = stats
        self._close_streams = close_streams
        self._routes: dict[str, tuple[str, Callable[[Send], Awaitable[None]]]] = {
            "/_debug/requests": ("GET", self._requests),
            "/_debug/requests/clear": ("POST", self._clear),
            "/_debug/stats": ("GET", self._stats_page),
            "/_debug/pollers": ("GET", self._pollers),
            "/_debug/close-streams": ("POST", self._close),
        }

    async def handle(self, scope: Scope, send: Send) -> None:
        route = self._routes.get(scope["path"])
        if route is None:
            await send_text(send, 404, "Not Found")
            return
        method, handler = route
        if scope["method"] != method:
            await send_bytes(send, 405, extra_headers=[(b"allow", method.encode("ascii"))])
            return
        await handler(send)

    async def _requests(self, send: Send) -> None:
        await send_json(send, 200, self._log.entries())

    async def _pollers(self, send: Send) -> None:
        await send_json(send, 200, {task: dict(agents) for task, agents in self._log.pollers.items()})

    async def _clear(self, send: Send) -> None:
        self._log.clear()
        await send_json(send, 200, {"cleared": True})

    async def _stats_page(self, send: Send) -> None:
        await send_json(send, 200, dict(self._stats()))

    async def _close(self, send: Send) -> None:
        await send_json(send, 200, {"closed": self._close_streams()})
