"""The ASGI application: routing, transport checks, JSON or SSE answers, lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import streams
from .asgi import (
    BodyTooLarge,
    Headers,
    Receive,
    Scope,
    Send,
    SseStream,
    read_body,
    send_bytes,
    send_json,
    send_text,
    wait_for_disconnect,
)
from .debug import DebugEndpoints, RequestLog
from .envelope import (
    Request,
    check_duplicate_headers,
    check_notification_version,
    check_request,
    is_notification,
    parse_message,
)
from .hosts import HostGuard
from .hub import Hub
from .listen import honoured_filter, serve_listen
from .methods import Methods
from .persist import TaskFile
from .protocol import ErrorCode, JsonObject, RpcError, error_message, result_message
from .signing import Signer
from .tasks import TaskStore

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# Answers slower than this switch to SSE, so clients meet both response kinds (§8.2).
SSE_AFTER_SECONDS = 0.3
STREAM_END_SECONDS = 2.0


class DemoServerApp:
    def __init__(
        self,
        *,
        poll_interval_ms: int,
        keepalive_seconds: float,
        debug: bool,
        allowed_hosts: Iterable[str] = (),
        tools_page_size: int = 100,
        state_file: Path | None = None,
        permissive_inputs: bool = False,
    ) -> None:
        self.hub = Hub()
        self.store = TaskStore(self.hub, TaskFile(state_file) if state_file is not None else None)
        self.methods = Methods(
            self.store, Signer(), poll_interval_ms, tools_page_size, permissive_inputs=permissive_inputs
        )
        self.keepalive_seconds = keepalive_seconds
        self.hosts = HostGuard(allowed_hosts)
        self.request_log = RequestLog() if debug else None
        self._debug = (
            DebugEndpoints(self.request_log, self.stats, self.hub.close_all)
            if self.request_log is not None
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] != "http" or not await self._trusted(scope, send):
            return
        elif scope["path"] == MCP_PATH:
            await self._mcp(scope, receive, send)
        elif self._debug is not None and scope["path"].startswith("/_debug/"):
            await self._debug.handle(scope, send)
        else:
            await send_text(send, 404, "Not Found")

    def stats(self) -> dict[str, Any]:
        methods = self.request_log.methods if self.request_log is not None else {}
        return {
            "methods": dict(methods),
            "listen_streams_open": self.hub.open_count,
            "tasks": self.store.count,
            "tasks_without_mcp_name": dict(self.methods.missing_mcp_name),
        }

    async def end_streams(self) -> None:
        """Ends every listen stream with its final response and waits (bounded) until sent."""
        self.hub.close_all()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STREAM_END_SECONDS):
                await self.hub.wait_idle()

    async def _trusted(self, scope: Scope, send: Send) -> bool:
        """DNS-rebinding protection: a foreign Host gets 421, a foreign Origin 403 (as the SDK)."""
        headers = Headers(scope["headers"])
        if not self.hosts.host_ok(headers.get("host")):
            logger.warning("refused a request for Host %r", headers.get("host"))
            await send_text(send, 421, "Invalid Host header")
            return False
        if not self.hosts.origin_ok(headers.get("origin")):
            logger.warning("refused a request from Origin %r", headers.get("origin"))
            await send_text(send, 403, "Invalid Origin header")
            return False
        return True

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                restored = self.store.restore(self.methods.task_body)
                if restored:
                    logger.info("%d tasks kept from before the restart", restored)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.hub.close_all()
                self.store.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await send_bytes(send, 405, extra_headers=[(b"allow", b"POST")])
            return
        headers = Headers(scope["headers"])
        if not _accepts_json_and_sse(headers):
            await send_bytes(send, 406)
            return
        if not _is_json(headers.get("content-type")):
            await send_text(send, 400, "Invalid Content-Type header")
            return
        try:
            body = await read_body(receive, headers)
        except BodyTooLarge:
            await send_text(send, 413, "Request body too large (the limit is 1 MiB)")
            return
        await self._handle_body(body, headers, send, receive)

    async def _handle_body(self, body: bytes, headers: Headers, send: Send, recv: Receive) -> None:
        try:
            message = parse_message(body)
        except RpcError as error:
            self._record(headers, _json_or_none(body))
            await _send_error(send, None, error)
            return
        self._record(headers, message)
        try:
            check_duplicate_headers(headers)
            if is_notification(message):
                check_notification_version(headers)
                await send_bytes(send, 202)
                return
            request = check_request(message, headers)
        except RpcError as error:
            await _send_error(send, message.get("id"), error)
            return
        if request.method == "subscriptions/listen":
            await self._listen(request, send, recv)
        else:
            await self._answer(request, send, recv)

    async def _listen(self, request: Request, send: Send, receive: Receive) -> None:
        try:
            honoured = honoured_filter(request, self.store.exists)
        except RpcError as error:
            await _send_error(send, request.id, error)
            return
        await serve_listen(request, honoured, self.hub, self.keepalive_seconds, send, receive)

    async def _answer(self, request: Request, send: Send, receive: Receive) -> None:
        outbox: asyncio.Queue[JsonObject] = asyncio.Queue()
        noticed = asyncio.Event()

        def sink(message: JsonObject) -> None:
            outbox.put_nowait(message)
            noticed.set()

        work = asyncio.ensure_future(self._outcome(request, sink))
        first_note = asyncio.ensure_future(noticed.wait())
        try:
            await asyncio.wait(
                {work, first_note}, timeout=SSE_AFTER_SECONDS, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            first_note.cancel()
        if work.done() and outbox.empty():
            status, message = work.result()
            await send_json(send, status, message)
        else:
            await self._answer_over_sse(work, outbox, send, receive)

    async def _answer_over_sse(
        self,
        work: asyncio.Future[tuple[int, JsonObject]],
        outbox: asyncio.Queue[JsonObject],
        send: Send,
        receive: Receive,
    ) -> None:
        stream = SseStream(send)
        await stream.open()
        await stream.ping()
        watcher: asyncio.Future[Any] = asyncio.ensure_future(wait_for_disconnect(receive))
        note: asyncio.Future[JsonObject] = asyncio.ensure_future(outbox.get())
        try:
            while True:
                done, _ = await asyncio.wait(
                    {work, watcher, note},
                    timeout=self.keepalive_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if note in done:
                    await stream.message(note.result())
                    note = asyncio.ensure_future(outbox.get())
                    continue
                if work in done:
                    while not outbox.empty():
                        await stream.message(outbox.get_nowait())
                    await stream.message(work.result()[1])
                    await stream.close()
                    return
                if watcher in done:  # closing the stream cancels the request (§8.5)
                    work.cancel()
                    return
                await stream.ping()
        finally:
            watcher.cancel()
            note.cancel()

    async def _outcome(self, request: Request, sink: streams.Sink) -> tuple[int, JsonObject]:
        streams.bind(sink)
        try:
            result = await self.methods.dispatch(request)
        except RpcError as error:
            return error.http_status, error_message(request.id, error)
        except Exception:
            # Request boundary: one bad handler must not take the server down.
            logger.exception("%s failed", request.method)
            internal = RpcError(ErrorCode.INTERNAL_ERROR, "Internal error")
            return internal.http_status, error_message(request.id, internal)
        return 200, result_message(request.id, result)

    def _record(self, headers: Headers, body: Any) -> None:
        if self.request_log is not None:
            self.request_log.record(headers, body)


async def _send_error(send: Send, request_id: Any, error: RpcError) -> None:
    valid_id = request_id if isinstance(request_id, str | int) else None
    await send_json(send, error.http_status, error_message(valid_id, error))


def _media_types(values: list[str]) -> set[str]:
    return {part.split(";")[0].strip().lower() for value in values for part in value.split(",")}


def _accepts_json_and_sse(headers: Headers) -> bool:
    accepted = _media_types(headers.get_all("accept"))
    return {"application/json", "text/event-stream"} <= accepted


def _is_json(content_type: str | None) -> bool:
    return content_type is not None and _media_types([content_type]) == {"application/json"}


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
