"""McpClient: one MCP server endpoint, spoken to over Streamable HTTP at revision 2026-07-28.

Every method is a single POST (§0.4 of the wire guide); nothing is retried here, because only
the caller knows whether a retry is safe (tools/call may create a second task), except a refusal
that says nothing ran and that one retry can fix (-32022 naming our version, -32020 over
Mcp-Param-* headers a fresh tools/list corrects).
"""

import asyncio
import itertools
import json
import logging
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import httpx

from tasksapp.mcpclient import legacy
from tasksapp.mcpclient.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    InvalidHeaderAnnotation,
    InvalidResponse,
    ListenUnsupported,
    McpError,
    ProtocolError,
    StreamDropped,
    TransportError,
)
from tasksapp.mcpclient.failures import html_page, not_an_endpoint
from tasksapp.mcpclient.reading import (
    TRANSPORT_FAILURES,
    _broken,
    _describe,
    _Head,
    _http_error,
    _is_json,
    _is_sse,
    _json_or_none,
    _listen_event,
    _means_legacy,
    _modern_discovery,
    _offers_our_version,
    _opt_str,
    _protocol_error,
    _result_of,
    _same_id,
    _session_gone,
    _sse_events,
    read_capped,
)
from tasksapp.mcpclient.relay import Relayed
from tasksapp.mcpclient.transport import FRESH_CONNECTION, ClosedBeforeAnswer
from tasksapp.mcpclient.types import (
    CallOutcome,
    DetailedTask,
    Discovery,
    JsonObject,
    ListenEnded,
    ListenEvent,
    TaskCreated,
    Tool,
    parse_call_outcome,
    parse_detailed_task,
    parse_tool,
    require_object,
    server_info_of,
)
from tasksapp.mcpclient.wire import (
    ACCEPT,
    LEGACY_VERSION,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    PROTOCOL_VERSION,
    InputKinds,
    SseParser,
    envelope,
    name_header,
    param_header_names,
    param_header_values,
    param_headers,
)

log = logging.getLogger(__name__)


def _uncallable(tool: str, why: str) -> InvalidHeaderAnnotation:
    return InvalidHeaderAnnotation(f"tool {tool!r} cannot be called: {why} (x-mcp-header, §2.4)")


DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_CLIENT_INFO: JsonObject = {"name": "mcp-tasks-dashboard", "version": "0.1.0"}
_MAX_TOOL_PAGES = 100
# Reads: asked again, once, when their connection closed before any byte of the answer came.
READS = frozenset({"server/discover", "tools/list", "tasks/get"})


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. `read` is the longest silence between bytes; `request` and `call` bound a whole exchange.

    A tools/call is bounded by `call` alone: servers may stay silent until the tool is done.
    """

    connect: float = 5.0
    read: float = 30.0
    request: float = 60.0
    call: float = 600.0
    listen_idle: float = 60.0


RequestHeaders = dict[str, str] | list[tuple[bytes, bytes]]
DEFAULT_TIMEOUTS = Timeouts()
NO_INPUT_KINDS = InputKinds()


def default_transport(*, block_private_addresses: bool = False) -> httpx.AsyncBaseTransport:
    """httpx's API on aiohttp's connection pool: the cheapest per request of those measured.

    bench/transport.py holds the measurement (docs/benchmarks-transport.md has the figures).
    """
    from tasksapp.mcpclient.transport import AiohttpTransport

    return AiohttpTransport(max_connections=200, block_private_addresses=block_private_addresses)


class McpClient:
    """An async client for one MCP endpoint. Use it as an async context manager, or call aclose()."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        input_kinds: InputKinds = NO_INPUT_KINDS,
        client_info: JsonObject | None = None,
        era: Literal["modern", "legacy"] | None = None,
        declare_tasks: bool = True,
        block_private_addresses: bool = False,
        auth: httpx.Auth | None = None,
    ) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self.url = url
        self.timeouts = timeouts
        self.max_body_bytes = max_body_bytes
        self.input_kinds = input_kinds
        self.era = era
        self._client_info = client_info or DEFAULT_CLIENT_INFO
        self._capabilities = input_kinds.capabilities()
        if not declare_tasks:
            del self._capabilities["extensions"]
        self._meta_json = json.dumps(envelope(self._capabilities, self._client_info), separators=(",", ":"))
        routing = {"mcp-protocol-version", "mcp-method", "mcp-name", "content-type", "accept"}
        if clash := routing & {name.lower() for name in headers or {}}:
            raise ValueError(f"extra headers may not set {', '.join(sorted(clash))}: the client owns them")
        self._fixed_headers = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "User-Agent": f"{DEFAULT_CLIENT_INFO['name']}/{DEFAULT_CLIENT_INFO['version']}",
            **(headers or {}),
        }
        if token:
            self._fixed_headers["Authorization"] = f"Bearer {token}"
        # Any httpx.Auth (an OAuth provider, for one) sees every request and may answer a 401
        # with a new attempt; see _open.
        self._auth = auth
        # httpx's request and response types over the transport directly: this client needs none
        # of AsyncClient's cookies, auth, redirects or hooks, and skipping them saves ~20% CPU per
        # request (bench/transport.py).
        self._transport = transport or default_transport(block_private_addresses=block_private_addresses)
        self._url = parsed
        self._host = parsed.netloc  # the Host header, as httpx would write it
        self._timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect).as_dict()
        # A tools/call may be silent until it answers (the TypeScript SDK's default): its wait is
        # bounded by the call timeout, not by the read timeout.
        self._call_timeout = httpx.Timeout(max(timeouts.read, timeouts.call), connect=timeouts.connect)
        self._ids = itertools.count(1)
        # What tools/list taught this client: tool -> x-mcp-header mapping, or why it cannot be called.
        self._param_headers: dict[str, dict[str, str]] = {}
        self._unusable_tools: dict[str, str] = {}
        self._tools_listed = False
        self._legacy_headers: dict[str, str] | None = None
        self._legacy_tasks = False  # the legacy server offers tasks for tools/call
        self._legacy_task_support: dict[str, str] | None = None  # tool -> execution.taskSupport
        self._method_headers: dict[str, list[tuple[bytes, bytes]]] = {}

    async def __aenter__(self) -> "McpClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Ends a legacy session (DELETE, so the server can free it), then closes the connections."""
        try:
            await self._end_legacy_session()
        finally:
            await self._transport.aclose()
            if closer := getattr(self._auth, "aclose", None):
                await closer()  # an OAuth provider's own connections

    # --- public methods -------------------------------------------------------------------

    async def discover(self) -> Discovery:
        """server/discover; on a legacy (2025-11-25 or older) server, the initialize handshake."""
        try:
            result = await self._call("server/discover", {})
        except ProtocolError as exc:
            if not _means_legacy(exc):
                raise
        except TransportError as exc:
            if isinstance(exc, InvalidResponse) or exc.status not in (400, 404, 405):
                raise
        else:
            versions = result.get("supportedVersions")
            if isinstance(versions, list) and PROTOCOL_VERSION in versions:
                self.era = "modern"
                return _modern_discovery(result, versions)
        return await self._initialize_legacy()

    async def list_tools(self, *, max_tools: int | None = None, max_bytes: int | None = None) -> list[Tool]:
        """tools/list, following nextCursor. Tools whose x-mcp-header annotation is invalid are dropped.

        With max_tools or max_bytes (of the tools' JSON), no further page is asked for once a page
        brings the total past either: the caller sees more than it allowed and knows the list was cut.
        """
        tools: list[Tool] = []
        cursor: str | None = None
        size = 0
        for _ in range(_MAX_TOOL_PAGES):
            result = await self._call("tools/list", {"cursor": cursor} if cursor else {})
            page = result.get("tools")
            if not isinstance(page, list):
                raise InvalidResponse("tools/list result.tools is not an array")
            tools.extend(self._accept_tool(parse_tool(raw, f"tools[{i}]")) for i, raw in enumerate(page))
            if max_bytes is not None:
                size += len(json.dumps(page, separators=(",", ":")))
            cursor = result.get("nextCursor")
            bounded = (max_tools is not None and len(tools) > max_tools) or (
                max_bytes is not None and size > max_bytes
            )
            if not cursor or bounded:
                self._tools_listed = True
                if self.era == "legacy":
                    self._legacy_task_support = {tool.name: legacy.task_support(tool.raw) for tool in tools}
                return [tool for tool in tools if tool.name in self._param_headers]
            if not isinstance(cursor, str):
                raise InvalidResponse("tools/list result.nextCursor is not a string")
        raise InvalidResponse(f"tools/list returned more than {_MAX_TOOL_PAGES} pages")

    async def request(self, method: str, params: JsonObject | None = None) -> JsonObject:
        """Any method, with the full envelope and routing headers; returns the raw result object."""
        return await self._call(method, params or {})

    async def relay(
        self,
        method: str,
        request_id: int | str,
        params: JsonObject,
        *,
        capabilities: JsonObject,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Relayed:
        """Send one request on behalf of another client, for an intermediary (the gateway).

        `params` are sent as given, `_meta` included, with the protocol version and `capabilities`
        set; the routing headers, credentials, address policy and body cap are this client's. The
        answer is returned unread and uninterpreted (a JSON-RPC error is not raised): read it
        within `relay_deadline(method)` and close it. Modern (2026-07-28) servers only.
        """
        given = params.get("_meta")
        meta = {**(given if isinstance(given, dict) else {}), META_VERSION: PROTOCOL_VERSION}
        meta[META_CAPABILITIES] = capabilities
        meta.setdefault(META_CLIENT_INFO, self._client_info)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}}
        headers = self._headers(method, params)
        if extra_headers:
            added = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra_headers.items()]
            headers = [*headers, *added]
        body = json.dumps(message, separators=(",", ":")).encode()
        timeout = self._call_timeout if method == "tools/call" else None
        return Relayed(await self._open(body, headers, timeout), self.max_body_bytes, method)

    def relay_deadline(self, method: str) -> float:
        """Seconds a relayed exchange may last as a whole (a tools/call: the call timeout)."""
        if method == "tools/call":
            return self.timeouts.call
        return max(self.timeouts.request, self.timeouts.read)

    async def call_tool(
        self,
        name: str,
        arguments: JsonObject | None = None,
        *,
        input_responses: JsonObject | None = None,
        request_state: str | None = None,
        input_schema: Mapping[str, object] | None = None,
    ) -> CallOutcome:
        """tools/call: a ToolResult, an InputRequired round (retry with its answers), or a TaskCreated.

        The tool's `Mcp-Param-*` headers (§2.4) come from the tools/list this client made, else
        from `input_schema` (a stored copy of the tool's inputSchema), else from a tools/list made
        first. A -32020 refusal is answered by listing the tools again and, when that changes the
        headers, one retry: the server refused before running anything. A tool whose annotation
        breaks §2.4 raises InvalidHeaderAnnotation and nothing is sent.
        """
        params: JsonObject = {"name": name, "arguments": arguments or {}}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        if await self._era() == "legacy":
            if await self._legacy_runs_as_task(name):
                return await self._legacy_task_call(params)
            return parse_call_outcome(await self._call("tools/call", params, total=self.timeouts.call))
        extra = await self._headers_for_tool(name, arguments or {}, input_schema)
        try:
            result = await self._call("tools/call", params, extra_headers=extra, total=self.timeouts.call)
        except ProtocolError as exc:
            if exc.code != HEADER_MISMATCH:
                raise
            fresh = await self._relisted_headers(name, arguments or {})
            if fresh is None or fresh == extra:
                raise
            result = await self._call("tools/call", params, extra_headers=fresh, total=self.timeouts.call)
        return parse_call_outcome(result)

    async def get_task(self, task_id: str) -> DetailedTask:
        """tasks/get. An unknown or expired task raises ProtocolError with is_not_found."""
        if legacy.unpack(task_id) is not None or await self._era() == "legacy":
            task = await self._legacy_get_task(task_id)
        else:
            result = await self._task_call("tasks/get", {"taskId": task_id})
            task = parse_detailed_task(result, "tasks/get result")
        if task.task_id != task_id:
            raise InvalidResponse("tasks/get answered for a different taskId than the one asked for")
        return task

    async def update_task(self, task_id: str, input_responses: JsonObject) -> None:
        """tasks/update. The ack is eventually consistent: keep polling afterwards."""
        if await self._era() == "legacy":
            raise McpError(
                f"tasks/update: {self.url} is a legacy (2025-11-25) server; its tasks take input "
                "through tasks/result, which this client does not drive. Nothing was sent."
            )
        await self._task_call("tasks/update", {"taskId": task_id, "inputResponses": input_responses})

    async def cancel_task(self, task_id: str) -> None:
        """tasks/cancel. Cooperative: the task may still end completed or failed."""
        if legacy.unpack(task_id) is not None or await self._era() == "legacy":
            headers, server_id = await self._legacy_task_headers(task_id, "tasks/cancel")
            await self._legacy_exchange(headers, "tasks/cancel", {"taskId": server_id})
            return
        await self._task_call("tasks/cancel", {"taskId": task_id})

    # --- resources and prompts: the raw results, for callers that show them --------------

    async def list_resources(self) -> list[JsonObject]:
        return await self._pages("resources/list", "resources")

    async def list_resource_templates(self) -> list[JsonObject]:
        return await self._pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> JsonObject:
        """resources/read (Mcp-Name: the URI); the raw ReadResourceResult."""
        return await self._call("resources/read", {"uri": uri})

    async def list_prompts(self) -> list[JsonObject]:
        return await self._pages("prompts/list", "prompts")

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        input_responses: JsonObject | None = None,
        request_state: str | None = None,
    ) -> JsonObject:
        """prompts/get; the raw result, which may be an input_required round (§4) like tools/call."""
        params: JsonObject = {"name": name, "arguments": dict(arguments or {})}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        return await self._call("prompts/get", params)

    async def _pages(self, method: str, key: str) -> list[JsonObject]:
        items: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            result = await self._call(method, {"cursor": cursor} if cursor else {})
            page = result.get(key)
            if not isinstance(page, list) or not all(isinstance(item, dict) for item in page):
                raise InvalidResponse(f"{method} result.{key} is not an array of objects")
            items.extend(page)
            cursor = result.get("nextCursor")
            if not cursor:
                return items
            if not isinstance(cursor, str):
                raise InvalidResponse(f"{method} result.nextCursor is not a string")
        raise InvalidResponse(f"{method} returned more than {_MAX_TOOL_PAGES} pages")

    async def listen(
        self, task_ids: Iterable[str], *, subscription_id: str | None = None
    ) -> AsyncGenerator[ListenEvent]:
        """subscriptions/listen for task pushes.

        Yields a ListenAck, then a DetailedTask per notifications/tasks frame, then ListenEnded if
        the server closes gracefully. A stream that breaks off raises StreamDropped; a server
        without the method raises ListenUnsupported.
        """
        if await self._era() == "legacy":
            raise ListenUnsupported("a legacy (pre-2026-07-28) server has no subscriptions/listen")
        sub_id = subscription_id or f"listen-{next(self._ids)}-{secrets.token_hex(4)}"
        params = {"notifications": {"taskIds": list(task_ids)}}
        body = self._body(sub_id, "subscriptions/listen", params)
        timeout = httpx.Timeout(self.timeouts.listen_idle, connect=self.timeouts.connect)
        response = await self._open(body, self._headers("subscriptions/listen", params), timeout)
        try:
            if not _is_sse(response) or not response.is_success:
                await self._listen_refused(response)
            async for event in self._listen_frames(response, sub_id):
                yield event
        finally:
            await response.aclose()

    # --- requests -------------------------------------------------------------------------

    async def _era(self) -> str:
        """The server's era, learned by discovery the first time it matters (§1.4)."""
        if self.era is None:
            await self.discover()
        return self.era or "modern"

    async def _task_call(self, method: str, params: JsonObject) -> JsonObject:
        result = await self._call(method, params)
        kind = result.get("resultType", "complete")
        if kind not in ("complete", "task"):  # "task" here is the SEP's editing slip (§10 #14)
            raise InvalidResponse(f"{method} result.resultType is {kind!r}, expected 'complete'")
        return result

    async def _call(
        self,
        method: str,
        params: JsonObject,
        *,
        extra_headers: Mapping[str, str] | None = None,
        total: float | None = None,
    ) -> JsonObject:
        if method != "server/discover":
            if self.era is None:
                await self.discover()  # §1.4: the era is learned once, by a modern probe
            if self.era == "legacy":
                return await self._legacy_call(method, params)
        request_id = next(self._ids)
        headers = self._headers(method, params)
        if extra_headers:
            headers = [
                *headers,
                *((k.encode("latin-1"), v.encode("latin-1")) for k, v in extra_headers.items()),
            ]
        body = self._body(request_id, method, params)
        try:
            result, _ = await self._exchange(method, request_id, body, headers, total)
        except ProtocolError as exc:
            if not _offers_our_version(exc):
                raise
            # -32022 although we asked for a version it lists: the request was refused before any
            # work, so one retry with a new id is safe (SEP-2575 version negotiation).
            request_id = next(self._ids)
            body = self._body(request_id, method, params)
            result, _ = await self._exchange(method, request_id, body, headers, total)
        return result

    async def _exchange(
        self,
        method: str,
        request_id: int,
        body: bytes,
        headers: RequestHeaders,
        total: float | None,
    ) -> tuple[JsonObject, httpx.Headers]:
        deadline = total or self.timeouts.request
        try:
            async with asyncio.timeout(deadline):
                timeouts = self._call_timeout if total else None
                response = await self._open(body, headers, timeouts, retry_closed=method in READS)
                try:
                    return await self._read_answer(method, request_id, response), response.headers
                finally:
                    await response.aclose()
        except TimeoutError:
            raise TransportError(f"{method}: no complete answer within {deadline:g} s") from None
        except TRANSPORT_FAILURES as exc:
            raise _broken(method, exc) from exc

    async def _open(
        self,
        body: bytes,
        headers: RequestHeaders,
        timeouts: httpx.Timeout | None,
        http_method: str = "POST",
        *,
        retry_closed: bool = False,
    ) -> httpx.Response:
        """Send one request. With retry_closed (reads only), a connection that closed before any
        byte of the answer is tried once more on a new one."""
        try:
            timeout = timeouts.as_dict() if timeouts is not None else self._timeout
            if isinstance(headers, list) and http_method == "POST":
                # The headers httpx would add, added here: with a ready stream httpx skips its
                # content encoding and header checks (a third of a poll's httpx cost).
                request = httpx.Request(
                    http_method,
                    self._url,
                    headers=[
                        (b"Host", self._host),
                        *headers,
                        (b"Content-Length", str(len(body)).encode()),
                    ],
                    stream=httpx.ByteStream(body),
                    extensions={"timeout": timeout},
                )
                request.read()
            else:
                request = httpx.Request(
                    http_method, self._url, content=body, headers=headers, extensions={"timeout": timeout}
                )
            try:
                return await self._send(request)
            except ClosedBeforeAnswer:
                if not retry_closed:
                    raise
                # A pooled connection the server closed as this was sent: nothing of the answer
                # came, and a read may be asked again, once, on a connection of its own.
                request.extensions[FRESH_CONNECTION] = True
                return await self._send(request)
        except httpx.UnsupportedProtocol as exc:
            raise TransportError(f"cannot reach {self.url}: {exc}", permanent=True) from exc
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # httpx-aiohttp reports a refused connection as ConnectTimeout: keep its own words.
            raise TransportError(f"cannot reach {self.url}: {_describe(exc)}") from exc
        except TRANSPORT_FAILURES as exc:
            raise TransportError(
                f"{self.url}: the request was sent but no answer came ({_describe(exc)}); "
                "the outcome is unknown"
            ) from exc

    async def _send(self, request: httpx.Request) -> httpx.Response:
        if self._auth is not None:
            return await self._send_with_auth(request)
        return await self._transport.handle_async_request(request)

    async def _send_with_auth(self, request: httpx.Request) -> httpx.Response:
        """httpx.Auth's flow over our transport: it may sign the request, and answer a 401 or 403
        with another attempt (as httpx.AsyncClient drives it)."""
        assert self._auth is not None
        flow = self._auth.async_auth_flow(request)
        request = await flow.__anext__()
        while True:
            response = await self._transport.handle_async_request(request)
            if self._auth.requires_response_body:
                await response.aread()
            try:
                request = await flow.asend(response)
            except StopAsyncIteration:
                return response
            await response.aclose()

    def _body(self, request_id: int | str, method: str, params: JsonObject) -> bytes:
        own_meta = params.get("_meta")
        if isinstance(own_meta, dict):
            meta = {**own_meta, **envelope(self._capabilities, self._client_info)}
            message = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": method,
                "params": {**params, "_meta": meta},
            }
            return json.dumps(message, separators=(",", ":")).encode()
        # The envelope is the same on every request: splice its pre-serialised JSON in (hot path).
        head = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, separators=(",", ":")
        )
        joiner = "," if params else ""
        return f'{head[:-2]}{joiner}"_meta":{self._meta_json}}}}}'.encode()

    def _headers(self, method: str, params: JsonObject) -> list[tuple[bytes, bytes]]:
        """The request headers as bytes pairs, built once per method (httpx re-checks str ones)."""
        base = self._method_headers.get(method)
        if base is None:
            fixed = {**self._fixed_headers, "MCP-Protocol-Version": PROTOCOL_VERSION, "Mcp-Method": method}
            base = self._method_headers[method] = [
                (k.encode("latin-1"), v.encode("latin-1")) for k, v in fixed.items()
            ]
        name = name_header(method, params)
        return base if name is None else [*base, (b"Mcp-Name", name.encode("ascii"))]

    # --- reading answers ------------------------------------------------------------------

    async def _read_answer(self, method: str, request_id: int, response: httpx.Response) -> JsonObject:
        head = _Head.of(response)
        if head.ctype == "text/event-stream" and response.is_success:
            return await self._read_sse_answer(method, request_id, response)
        body = await self._read_capped(response, head)
        message = _json_or_none(body) if head.is_json else None
        if isinstance(message, dict) and isinstance(message.get("error"), dict):
            raise _protocol_error(message["error"], response.status_code)
        if not response.is_success:
            raise _http_error(method, response, body)
        if message is None:
            if head.is_json:
                raise InvalidResponse(f"{method}: the response body is not valid JSON")
            ctype = response.headers.get("content-type", "")
            if page := html_page(ctype, body):
                raise InvalidResponse(not_an_endpoint(method, response.status_code, page))
            raise InvalidResponse(f"{method}: HTTP {response.status_code} with content type {ctype!r}")
        return _result_of(method, message, request_id)

    async def _read_capped(self, response: httpx.Response, head: "_Head | None" = None) -> bytes:
        return await read_capped(response, self.max_body_bytes, head)

    async def _read_sse_answer(self, method: str, request_id: int, response: httpx.Response) -> JsonObject:
        parser = SseParser(self.max_body_bytes)
        async for data in _sse_events(response, parser, method):
            message = _json_or_none(data.encode())
            if not isinstance(message, dict):
                raise InvalidResponse(f"{method}: an SSE event is not a JSON object")
            if _same_id(message.get("id"), request_id) and ("result" in message or "error" in message):
                if isinstance(message.get("error"), dict):
                    raise _protocol_error(message["error"], response.status_code)
                return _result_of(method, message, request_id)
        cut = " (cut mid-event)" if parser.mid_event else ""
        raise StreamDropped(f"{method}: the SSE stream ended without a response{cut}; the outcome is unknown")

    async def _listen_refused(self, response: httpx.Response) -> None:
        try:
            async with asyncio.timeout(self.timeouts.request):
                body = await self._read_capped(response)
        except TimeoutError:
            raise TransportError("subscriptions/listen: the refusal never finished arriving") from None
        except TRANSPORT_FAILURES as exc:
            raise _broken("subscriptions/listen", exc) from exc
        message = _json_or_none(body) if _is_json(response) else None
        error = message.get("error") if isinstance(message, dict) else None
        refused = response.status_code in (404, 405)  # a definite "no such method", unlike a 5xx
        if refused or (isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND):
            raise ListenUnsupported("the server does not support subscriptions/listen; poll instead")
        if isinstance(error, dict):
            raise _protocol_error(error, response.status_code)
        if not response.is_success:
            raise _http_error("subscriptions/listen", response, body)
        raise InvalidResponse("subscriptions/listen was answered without an SSE stream")

    async def _listen_frames(self, response: httpx.Response, sub_id: str) -> AsyncIterator[ListenEvent]:
        parser = SseParser(self.max_body_bytes)
        acked = False
        async for data in _sse_events(response, parser, "listen stream", idle=self.timeouts.listen_idle):
            event = _listen_event(data, sub_id, acked)
            if event is None:
                continue
            acked = True
            yield event
            if isinstance(event, ListenEnded):
                return
        cut = " mid-event" if parser.mid_event else ""
        raise StreamDropped(f"listen stream closed{cut} without a final response")

    # --- tools ----------------------------------------------------------------------------

    def _accept_tool(self, tool: Tool) -> Tool:
        try:
            self._param_headers[tool.name] = param_header_names(tool.input_schema)
        except InvalidHeaderAnnotation as exc:
            log.warning("dropping tool %r: its x-mcp-header annotation is invalid (%s)", tool.name, exc)
            self._param_headers.pop(tool.name, None)
            self._unusable_tools[tool.name] = str(exc)
        else:
            self._unusable_tools.pop(tool.name, None)
        return tool

    async def _headers_for_tool(
        self, name: str, arguments: JsonObject, input_schema: Mapping[str, object] | None
    ) -> dict[str, str]:
        if name not in self._param_headers and name not in self._unusable_tools:
            if input_schema is not None:
                try:
                    return param_headers(input_schema, arguments)
                except InvalidHeaderAnnotation as exc:
                    raise _uncallable(name, str(exc)) from None
            if not self._tools_listed:
                await self.list_tools()
        if why := self._unusable_tools.get(name):
            raise _uncallable(name, why)
        return param_header_values(self._param_headers.get(name, {}), arguments)

    async def _relisted_headers(self, name: str, arguments: JsonObject) -> dict[str, str] | None:
        """The headers a fresh tools/list gives this call; None when the list cannot be had."""
        try:
            await self.list_tools()
        except McpError:
            return None
        return await self._headers_for_tool(name, arguments, None)

    # --- legacy servers (2025-11-25 and older): tools only, no tasks ----------------------

    async def _initialize_legacy(self) -> Discovery:
        result, self._legacy_headers = await self._legacy_handshake()
        self.era = "legacy"
        capabilities = result.get("capabilities")
        self._legacy_tasks = legacy.offers_tool_tasks(capabilities)
        version = self._legacy_headers["MCP-Protocol-Version"]
        return Discovery(
            era="legacy",
            protocol_version=version,
            supported_versions=[version],
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            tasks_supported=self._legacy_tasks,
            server_info=server_info_of(result),
            instructions=_opt_str(result.get("instructions")),
            raw=result,
        )

    async def _legacy_handshake(self) -> tuple[JsonObject, dict[str, str]]:
        """initialize + notifications/initialized: the result, and the headers of the new session."""
        params = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": self._client_info}
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode()
        headers = dict(self._fixed_headers)
        result, response_headers = await self._exchange("initialize", 0, body, headers, None)
        version = result.get("protocolVersion")
        if not isinstance(version, str):
            raise InvalidResponse("initialize result.protocolVersion is not a string")
        session = {**headers, "MCP-Protocol-Version": version}
        if session_id := response_headers.get("mcp-session-id"):
            session["Mcp-Session-Id"] = session_id
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        await (await self._open(note, session, None)).aclose()
        return result, session

    async def _require_legacy_tasks(self, method: str) -> None:
        if self._legacy_headers is None:
            await self._initialize_legacy()  # an era known from before: shake hands to learn the rest
        if not self._legacy_tasks:
            raise McpError(
                f"{method}: {self.url} is a legacy (2025-11-25 or older) server that offers no tasks; "
                "nothing was sent"
            )

    async def _legacy_runs_as_task(self, tool: str) -> bool:
        if self._legacy_headers is None:
            await self._initialize_legacy()
        if not self._legacy_tasks:
            return False
        if self._legacy_task_support is None or tool not in self._legacy_task_support:
            await self.list_tools()
        return (self._legacy_task_support or {}).get(tool) in ("optional", "required")

    async def _legacy_task_call(self, params: JsonObject) -> CallOutcome:
        """A task of a 2025-11-25 server, in a session of its own: the server may keep the task in
        the session that made it, so the session lives as long as the task (ended once it is seen
        finished) and its id travels in the task id this client hands out (legacy.handle)."""
        _, session = await self._legacy_handshake()
        params = {**params, "task": {}}  # 2025-11-25: the client asks for a task
        result = await self._legacy_exchange(session, "tools/call", params, total=self.timeouts.call)
        if "task" not in result:
            await self._end_session(session)
            return parse_call_outcome(result)
        server_id = require_object(result.get("task"), "tools/call result.task").get("taskId")
        if not isinstance(server_id, str):
            raise InvalidResponse("tools/call result.task.taskId is not a string")
        version = session["MCP-Protocol-Version"]
        task = legacy.created_task(result, legacy.handle(session.get("Mcp-Session-Id"), server_id, version))
        return TaskCreated(task=task, raw={"resultType": "task", **task.raw})

    async def _legacy_task_headers(self, task_id: str, method: str) -> tuple[dict[str, str], str]:
        """The headers (its own session, if it has one) and the server's id for a legacy task."""
        unpacked = legacy.unpack(task_id)
        if unpacked is None:
            await self._require_legacy_tasks(method)
            assert self._legacy_headers is not None
            return self._legacy_headers, task_id
        session, server_id, version = unpacked
        headers = {**self._fixed_headers, "MCP-Protocol-Version": version, "Mcp-Session-Id": session}
        return headers, server_id

    async def _legacy_get_task(self, task_id: str) -> DetailedTask:
        """tasks/get, and for a finished task tasks/result, as one modern DetailedTask."""
        headers, server_id = await self._legacy_task_headers(task_id, "tasks/get")
        state = await self._legacy_exchange(headers, "tasks/get", {"taskId": server_id})
        outcome: JsonObject | None = None
        error: ProtocolError | None = None
        if state.get("status") in ("completed", "failed"):
            try:
                outcome = await self._legacy_exchange(headers, "tasks/result", {"taskId": server_id})
            except ProtocolError as exc:
                error = exc
        task = legacy.translate(state, result=outcome, error=error, task_handle=task_id)
        if task.is_terminal and headers is not self._legacy_headers:
            await self._end_session(headers)  # the task's own session: nothing else lives there
        return task

    async def _legacy_exchange(
        self, headers: dict[str, str], method: str, params: JsonObject, total: float | None = None
    ) -> JsonObject:
        """One legacy request on the given session; a session the server no longer knows (404)
        means whatever lived in it is gone, which task callers see as not found."""
        request_id = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        try:
            result, _ = await self._exchange(method, request_id, body, headers, total)
        except (ProtocolError, TransportError) as exc:
            if "Mcp-Session-Id" in headers and method.startswith("tasks/") and _session_gone(exc):
                raise ProtocolError(
                    INVALID_PARAMS, f"{method}: the legacy session that held this task has ended", status=404
                ) from exc
            raise
        return result

    async def _end_legacy_session(self) -> None:
        headers, self._legacy_headers = self._legacy_headers, None
        if headers:
            await self._end_session(headers)

    async def _end_session(self, headers: dict[str, str]) -> None:
        """DELETE a legacy session so the server can free it (405: it does not allow that)."""
        if "Mcp-Session-Id" not in headers:
            return
        try:
            async with asyncio.timeout(self.timeouts.connect):
                response = await self._open(b"", headers, None, http_method="DELETE")
                await response.aclose()
        except (McpError, TimeoutError, *TRANSPORT_FAILURES) as exc:
            log.info("could not end a legacy session with %s: %s", self.url, exc)

    async def _legacy_call(self, method: str, params: JsonObject, *, retry: bool = True) -> JsonObject:
        if self._legacy_headers is None:
            await self._initialize_legacy()
        assert self._legacy_headers is not None
        request_id = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        total = self.timeouts.call if method == "tools/call" else None
        try:
            result, _ = await self._exchange(method, request_id, body, self._legacy_headers, total)
        except (ProtocolError, TransportError) as exc:
            if not retry or exc.status != 404 or "Mcp-Session-Id" not in self._legacy_headers:
                raise
            self._legacy_headers = None  # the session expired: shake hands again, then retry once
            return await self._legacy_call(method, params, retry=False)
        return result
