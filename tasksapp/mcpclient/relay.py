"""An upstream answer read for passing on: JSON or SSE as the server chose, within the client's limits.

`McpClient.relay()` sends one request as an intermediary would (the caller's own params and
`_meta`, the client's routing headers, credentials and capabilities given per request) and returns
a `Relayed`: the status, the content type, and the body read whole (capped) or event by event
(each event capped, silence bounded by the read timeout). Nothing is interpreted: a JSON-RPC
error is passed on as the server sent it.
"""

from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx

from tasksapp.mcpclient.errors import InvalidResponse, StreamDropped
from tasksapp.mcpclient.reading import (
    TRANSPORT_FAILURES,
    ReadBody,
    _broken,
    _Head,
    _json_or_none,
    _retry_after,
    _sse_events,
)
from tasksapp.mcpclient.wire import SseParser

Kind = Literal["json", "sse", "other"]


class Relayed:
    """One upstream answer. Close it (`aclose`) when done; iterate `messages()` for an SSE answer."""

    def __init__(self, response: httpx.Response, max_body_bytes: int, method: str) -> None:
        self.response = response
        self.status = response.status_code
        self._head = _Head.of(response)
        self._max = max_body_bytes
        self._method = method
        self.retry_after = _retry_after(response)

    @property
    def kind(self) -> Kind:
        if self._head.ctype == "text/event-stream" and self.response.is_success:
            return "sse"
        return "json" if self._head.is_json else "other"

    @property
    def content_type(self) -> str:
        return self._head.ctype

    async def body(self) -> bytes:
        """The whole body, inflated, at most max_body_bytes (InvalidResponse beyond)."""
        if self._head.length is not None and self._head.length > self._max:
            raise InvalidResponse(f"response body of {self._head.length} bytes exceeds {self._max}")
        if isinstance(self.response.stream, ReadBody):
            if len(self.response.stream.body) > self._max:
                raise InvalidResponse(f"response body exceeds {self._max} bytes")
            return self.response.stream.body
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in (
                self.response.aiter_bytes() if self._head.encoded else self.response.aiter_raw()
            ):
                size += len(chunk)
                if size > self._max:
                    raise InvalidResponse(f"response body exceeds {self._max} bytes")
                chunks.append(chunk)
        except TRANSPORT_FAILURES as exc:
            raise _broken(self._method, exc) from exc
        return b"".join(chunks)

    async def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        return _json_or_none(await self.body())

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        """Each SSE event's JSON-RPC message, as it arrives. A stream that breaks off or stays silent
        past the read timeout raises StreamDropped; an event that is not a JSON object, InvalidResponse."""
        parser = SseParser(self._max)
        async for data in _sse_events(self.response, parser, self._method):
            message = _json_or_none(data.encode())
            if not isinstance(message, dict):
                raise InvalidResponse(f"{self._method}: an SSE event is not a JSON object")
            yield message
        if parser.mid_event:
            raise StreamDropped(f"{self._method}: the SSE stream was cut mid-event")

    async def aclose(self) -> None:
        await self.response.aclose()
