"""The few ASGI primitives the demo server needs: headers, body, plain and SSE responses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .protocol import SSE_PING, dump_json, sse_event

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 1024 * 1024


class BodyTooLarge(Exception):
    pass


class Headers:
    """Request headers with every occurrence kept, so duplicates can be detected."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        # Field values exclude surrounding whitespace (RFC 9110 §5.5).
        self._pairs = [(k.decode("latin-1").lower(), v.decode("latin-1").strip(" \t")) for k, v in raw]

    def get_all(self, name: str) -> list[str]:
        return [value for key, value in self._pairs if key == name]

    def with_prefix(self, prefix: str) -> list[tuple[str, str]]:
        """(name without the prefix, value) of every header whose lowercased name starts with it."""
        return [(key[len(prefix) :], value) for key, value in self._pairs if key.startswith(prefix)]

    def get(self, name: str) -> str | None:
        values = self.get_all(name)
        return values[0] if values else None

    def as_dict(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for key, value in self._pairs:
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        return merged


async def read_body(receive: Receive, headers: Headers, limit: int = MAX_BODY_BYTES) -> bytes:
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns once the client has gone away; call only after the body has been read."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def send_bytes(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: str | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = list(extra_headers or [])
    if content_type is not None:
        headers.append((b"content-type", content_type.encode("latin-1")))
    headers.append((b"content-length", str(len(body)).encode("ascii")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(send: Send, status: int, payload: Any) -> None:
    await send_bytes(send, status, dump_json(payload), "application/json")


async def send_text(send: Send, status: int, text: str) -> None:
    await send_bytes(send, status, text.encode("utf-8"), "text/plain; charset=utf-8")


class SseStream:
    """One `text/event-stream` response; messages go out as `event: message` frames."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def open(self) -> None:
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"x-accel-buffering", b"no"),
        ]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def message(self, payload: Any) -> None:
        await self._write(sse_event(payload))

    async def ping(self) -> None:
        await self._write(SSE_PING)

    async def close(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _write(self, chunk: bytes) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
