"""Reading what a server sent: JSON-RPC answers and errors, HTTP statuses, SSE events, listen frames.

Every body read from outside, by every client (MCP, OAuth, metadata, webhooks), goes through
`body_chunks` / `read_capped`: inflated in bounded steps when it is compressed, and counted after
inflation while it streams, so nothing past the cap is ever held in memory.
"""

import email.utils
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from tasksapp.mcpclient.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_CAPABILITY,
    MISSING_CAPABILITY_DRAFT,
    UNSUPPORTED_VERSION,
    InvalidResponse,
    ProtocolError,
    StreamDropped,
    TransportError,
)
from tasksapp.mcpclient.failures import html_page, not_an_endpoint
from tasksapp.mcpclient.inflate import Inflater
from tasksapp.mcpclient.types import (
    Discovery,
    JsonObject,
    ListenAck,
    ListenEnded,
    ListenEvent,
    parse_detailed_task,
    require_object,
    server_info_of,
)
from tasksapp.mcpclient.wire import (
    META_SUBSCRIPTION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    SseParser,
)

log = logging.getLogger(__name__)

# What a transport may raise for a broken exchange (httpx-aiohttp leaves some aiohttp errors unmapped).
TRANSPORT_FAILURES = (httpx.HTTPError, aiohttp.ClientError, OSError)
_MODERN_ERRORS = {HEADER_MISMATCH, MISSING_CAPABILITY, MISSING_CAPABILITY_DRAFT, INVALID_PARAMS}
_PERMANENT_STATUSES = {400, 401, 403, 404, 405, 406, 410, 413, 415, 421}


def _means_legacy(exc: ProtocolError) -> bool:
    """§1.4: recognised modern errors mean a modern server, except -32022 listing only old versions."""
    if exc.code == UNSUPPORTED_VERSION:
        supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
        return (
            isinstance(supported, list)
            and bool(supported)
            and all(isinstance(v, str) and v < "2026" for v in supported)
        )
    return exc.code not in _MODERN_ERRORS and not exc.is_missing_capability


def _session_gone(exc: ProtocolError | TransportError) -> bool:
    """The server no longer knows a legacy session: 404 (the SDK), or a 400 naming the session
    (server-everything's "No valid session ID provided")."""
    return exc.status == 404 or (exc.status == 400 and "session" in str(exc).lower())


def _offers_our_version(exc: ProtocolError) -> bool:
    supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
    return exc.code == UNSUPPORTED_VERSION and isinstance(supported, list) and PROTOCOL_VERSION in supported


def _modern_discovery(result: JsonObject, versions: list[Any]) -> Discovery:
    capabilities = result.get("capabilities")
    if not isinstance(capabilities, dict):
        raise InvalidResponse("server/discover result.capabilities is not an object")
    extensions = capabilities.get("extensions")
    tasks = isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)
    return Discovery(
        era="modern",
        protocol_version=PROTOCOL_VERSION,
        supported_versions=[v for v in versions if isinstance(v, str)],
        capabilities=capabilities,
        tasks_supported=tasks,
        server_info=server_info_of(result),
        instructions=_opt_str(result.get("instructions")),
        raw=result,
    )


def _listen_event(data: str, sub_id: str, acked: bool) -> ListenEvent | None:
    frame = _json_or_none(data.encode())
    if not isinstance(frame, dict):
        raise InvalidResponse("a listen frame is not a JSON object")
    if "id" in frame and ("result" in frame or "error" in frame):
        if not _same_id(frame["id"], sub_id):
            return None
        if isinstance(frame.get("error"), dict):
            raise _protocol_error(frame["error"], None)
        return ListenEnded(subscription_id=sub_id, raw=frame)
    params = frame.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    stamp = meta.get(META_SUBSCRIPTION) if isinstance(meta, dict) else None
    if stamp is not None and stamp != sub_id:
        log.warning("ignoring a listen frame stamped for subscription %r, not %r", stamp, sub_id)
        return None
    method = frame.get("method")
    if method == "notifications/subscriptions/acknowledged":
        honoured = require_object(params.get("notifications", {}), "ack.notifications").get("taskIds", [])
        if not isinstance(honoured, list) or not all(isinstance(t, str) for t in honoured):
            raise InvalidResponse("ack.notifications.taskIds is not an array of strings")
        return ListenAck(subscription_id=sub_id, task_ids=honoured, raw=frame)
    if method == "notifications/tasks":
        if not acked:
            raise InvalidResponse("a notifications/tasks frame arrived before the acknowledgement")
        task = {k: v for k, v in params.items() if k != "_meta"}
        return parse_detailed_task(task, "notifications/tasks params")
    return None


def _result_of(method: str, message: Any, request_id: int) -> JsonObject:
    if not isinstance(message, dict):
        raise InvalidResponse(f"{method}: the response is not a JSON object")
    if not _same_id(message.get("id"), request_id):
        raise InvalidResponse(f"{method}: response id {message.get('id')!r} does not match {request_id}")
    if isinstance(message.get("error"), dict):
        raise _protocol_error(message["error"], None)
    return require_object(message.get("result"), f"{method} result")


def _protocol_error(error: JsonObject, status: int | None) -> ProtocolError:
    code, text = error.get("code"), error.get("message", "")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(text, str):
        raise InvalidResponse(f"malformed JSON-RPC error object: code={code!r}")
    return ProtocolError(code, text[:2000], error.get("data"), status=status)


def _http_error(method: str, response: httpx.Response, body: bytes) -> TransportError:
    status = response.status_code
    snippet = _snippet(body)
    page = html_page(response.headers.get("content-type", ""), body)
    if page and status != 401 and not (300 <= status < 400):
        # A web page where an MCP endpoint should be (a 403 from a site's CSRF check, a 404 page):
        # not "credentials refused", and never the page's markup.
        permanent = status in _PERMANENT_STATUSES
        return TransportError(not_an_endpoint(method, status, page), permanent=permanent, status=status)
    if status in (401, 403):
        challenge = response.headers.get("www-authenticate", "")
        detail = f" ({_snippet(challenge.encode())})" if challenge else ""
        return TransportError(
            f"{method}: HTTP {status}, credentials refused{detail}", permanent=True, status=status
        )
    if 300 <= status < 400:
        location = _snippet(response.headers.get("location", "").encode())
        message = f"{method}: HTTP {status} redirect to {location!r}; register that URL instead"
        return TransportError(message, permanent=True, status=status)
    permanent = status in _PERMANENT_STATUSES
    message = f"{method}: HTTP {status}" + (f": {snippet}" if snippet else "")
    return TransportError(message, permanent=permanent, status=status, retry_after=_retry_after(response))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    if value.strip().isascii() and value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ReadBody(httpx.AsyncByteStream):
    """A body a transport has read already (small, of known length; tasksapp/mcpclient/transport.py):
    `body` is all of it, and McpClient takes it as is instead of streaming it."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.body:
            yield self.body


@dataclass(frozen=True, slots=True)
class _Head:
    """The response headers this client reads, found in one pass (httpx's lookups scan each time)."""

    ctype: str
    length: int | None
    encoded: bool

    @property
    def is_json(self) -> bool:
        return self.ctype == "application/json" or self.ctype.endswith("+json")

    @classmethod
    def of(cls, response: httpx.Response) -> "_Head":
        ctype, length, encoded = "", None, False
        for name, value in response.headers.raw:
            lowered = name.lower()
            if lowered == b"content-type":
                ctype = value.split(b";", 1)[0].strip().lower().decode("latin-1")
            elif lowered == b"content-length" and value.strip().isdigit():
                length = int(value)
            elif lowered == b"content-encoding":
                encoded = True
        return cls(ctype, length, encoded)


class BodyTooLarge(InvalidResponse):
    """A body (inflated) is larger than its reader allows; what was read is dropped."""

    def __init__(self, limit: int, length: int | None = None) -> None:
        said = f" of {length} bytes" if length is not None else ""
        super().__init__(f"response body{said} exceeds {limit} bytes")
        self.limit = limit


async def body_chunks(response: httpx.Response, head: _Head | None = None) -> AsyncIterator[bytes]:
    """The body as it arrives, inflated at most CHUNK bytes at a time when the transport left it
    compressed (AiohttpTransport inflates itself; another transport may not)."""
    if isinstance(response.stream, ReadBody):
        if response.stream.body:
            yield response.stream.body
        return
    head = head or _Head.of(response)
    if not head.encoded:
        async for chunk in response.aiter_raw():
            yield chunk
        return
    inflater = Inflater(str(response.headers.get("content-encoding", "")).strip().lower())
    async for chunk in response.aiter_raw():
        for part in inflater.feed(chunk):
            yield part


async def read_capped(response: httpx.Response, limit: int, head: _Head | None = None) -> bytes:
    """The whole body, or BodyTooLarge as soon as more than `limit` bytes (inflated) arrived."""
    head = head or _Head.of(response)
    if head.length is not None and head.length > limit:
        raise BodyTooLarge(limit, head.length)
    if isinstance(response.stream, ReadBody):  # read by our transport already (every tasks/get)
        if len(response.stream.body) > limit:
            raise BodyTooLarge(limit)
        return response.stream.body
    chunks: list[bytes] = []
    size = 0
    async for chunk in body_chunks(response, head):
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _content_type(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "")).split(";")[0].strip().lower()


def _is_sse(response: httpx.Response) -> bool:
    return _content_type(response) == "text/event-stream"


def _is_json(response: httpx.Response) -> bool:
    ctype = _content_type(response)
    return ctype == "application/json" or ctype.endswith("+json")


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _same_id(received: Any, sent: int | str) -> bool:
    """JSON-RPC ids match by type and value (true is not 1)."""
    return type(received) is type(sent) and received == sent


def _broken(what: str, exc: BaseException) -> TransportError:
    if isinstance(exc, httpx.TimeoutException):
        return StreamDropped(f"{what}: timed out waiting for data ({type(exc).__name__})")
    return StreamDropped(f"{what}: the connection broke ({_describe(exc)})")


async def _sse_events(
    response: httpx.Response, parser: SseParser, what: str, *, idle: float | None = None
) -> AsyncIterator[str]:
    """The data of each SSE event; a broken or silent connection becomes StreamDropped."""
    try:
        async for chunk in body_chunks(response):
            for data in parser.feed(chunk):
                yield data
        for data in parser.finish():
            yield data
    except httpx.ReadTimeout:
        raise StreamDropped(f"{what}: silent for {idle or 0:g} s") from None
    except TRANSPORT_FAILURES as exc:
        raise _broken(what, exc) from exc


def _snippet(body: bytes, limit: int = 200) -> str:
    text = body[: limit * 4].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else " " for c in text).strip()
    return text[:limit] + ("…" if len(text) > limit else "")


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
