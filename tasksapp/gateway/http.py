"""The ASGI side of the gateway: request headers, the bounded body, JSON and SSE answers."""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Every answer: never cached, never sniffed as another type.
COMMON_HEADERS = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-store, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"x-content-type-options", b"nosniff"),
]
SSE_PING = b": ping\n\n"


class BodyTooLarge(Exception):
    """The request body is larger than the gateway accepts."""


class BadContentLength(Exception):
    """The request's Content-Length is not a length: not ASCII digits, or sent twice differently."""


class Headers:
    """Request headers with every occurrence kept (a routing header sent twice is an error)."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        # Field values exclude surrounding whitespace (RFC 9110 §5.5).
        self.pairs = [(k.decode("latin-1").lower(), v.decode("latin-1").strip(" \t")) for k, v in raw]

    def get_all(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]

    def get(self, name: str) -> str | None:
        for key, value in self.pairs:
            if key == name:
                return value
        return None

    def with_prefix(self, prefix: str) -> list[tuple[str, str]]:
        """(the rest of the lowercased name, value) of every header whose name starts with prefix."""
        return [(key[len(prefix) :], value) for key, value in self.pairs if key.startswith(prefix)]


def dump(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def read_body(receive: Receive, headers: Headers, limit: int) -> bytes:
    """The whole request body; BodyTooLarge as soon as it (or its declared length) passes limit,
    BadContentLength for a declared length that is not one."""
    declared = declared_length(headers)
    if declared is not None and declared > limit:
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


def declared_length(headers: Headers) -> int | None:
    """The Content-Length the client sent (None if none). ASCII digits only: `str.isdigit()` takes
    "²", which int() refuses, and "١٢", which it reads (RFC 9110 §8.6: 1*DIGIT)."""
    values = set(headers.get_all("content-length"))
    if not values:
        return None
    value = values.pop()
    if values or not (value.isascii() and value.isdigit()):
        raise BadContentLength
    return int(value)


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns once the client has gone away; only after the body was read."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def send_bytes(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [*COMMON_HEADERS, *(extra or [])]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    headers.append((b"content-length", str(len(body)).encode("ascii")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(
    send: Send, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send_bytes(send, status, dump(payload), b"application/json", extra)


async def send_result(send: Send, request_id: Any, result: bytes) -> None:
    """A JSON-RPC result already rendered (`result` is its JSON), answered with HTTP 200."""
    body = b'{"jsonrpc":"2.0","id":' + dump(request_id) + b',"result":' + result + b"}"
    await send_bytes(send, 200, body, b"application/json")


def sse_frame(payload: Any) -> bytes:
    return b"event: message\ndata: " + dump(payload) + b"\n\n"


class SseResponse:
    """One text/event-stream answer: opened once, then a frame per JSON-RPC message."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.opened = False

    async def open(self, status: int = 200) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": SSE_HEADERS})
        self.opened = True

    async def message(self, payload: Any) -> None:
        await self.write(sse_frame(payload))

    async def write(self, chunk: bytes) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def close(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})
