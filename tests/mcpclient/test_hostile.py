"""McpClient against servers that lie, break off, stall or flood.

Every fault must end in a typed McpError whose message names what was wrong: never a
KeyError or TypeError from deep inside the client, never a hang. Each server here is a real
HTTP server on 127.0.0.1 (tests/mcpclient/hostile_server.py); nothing in httpx or in the
client is patched. Every await that could hang runs under HANG_GUARD, so a regression fails.
"""

import asyncio
import dataclasses
import email.utils
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web

from tasksapp.mcpclient import (
    CompletedTask,
    DetailedTask,
    InputRequired,
    InvalidResponse,
    ListenAck,
    ListenEnded,
    ListenEvent,
    ListenUnsupported,
    McpClient,
    McpError,
    ProtocolError,
    StreamDropped,
    TaskCreated,
    Timeouts,
    ToolResult,
    TransportError,
    WorkingTask,
)
from tests.mcpclient.hostile_server import (
    DISCOVERY,
    DROP,
    LISTEN_META,
    TASK_ID,
    HostileServer,
    Message,
    RawServer,
    closed_port,
    json_reply,
    ping_forever,
    raw_reply,
    response,
    rpc_error,
    sse_event,
    sse_reply,
    task,
)

HANG_GUARD = 10.0
FAST = Timeouts(connect=2.0, read=0.5, request=1.0, call=1.0, listen_idle=0.5)
SUB = "listen-hostile-1"
Answer = Callable[[Message], web.StreamResponse]


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> Callable[[], httpx.AsyncBaseTransport | None]:
    """The production transport (httpx over aiohttp's pool) and httpx's own, for network-level faults."""
    if request.param == "aiohttp":
        return lambda: None
    return lambda: httpx.AsyncHTTPTransport()


def answering(answer: Answer) -> Callable[[web.Request, Message], Awaitable[web.StreamResponse]]:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return answer(message)

    return script


async def raises[E: BaseException](kind: type[E], awaitable: Awaitable[Any]) -> E:
    async with asyncio.timeout(HANG_GUARD):
        with pytest.raises(kind) as info:
            await awaitable
    return info.value


async def get_task(script: Any, **client_kwargs: Any) -> DetailedTask:
    timeouts = client_kwargs.pop("timeouts", FAST)
    async with (
        asyncio.timeout(HANG_GUARD),
        HostileServer(script) as server,
        McpClient(server.url, timeouts=timeouts, **client_kwargs) as client,
    ):
        return await client.get_task(TASK_ID)


async def get_task_fails[E: BaseException](kind: type[E], script: Any, **client_kwargs: Any) -> E:
    return await raises(kind, get_task(script, **client_kwargs))


# The schema the caller stored for the tool (as the dashboard does): no argument travels as a
# header, so the client needs no tools/list before the call.
PLAIN_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


async def call_tool(script: Any, **client_kwargs: Any) -> Any:
    async with (
        asyncio.timeout(HANG_GUARD),
        HostileServer(script) as server,
        McpClient(server.url, timeouts=FAST, **client_kwargs) as client,
    ):
        return await client.call_tool("slow_count", {"n": 5}, input_schema=PLAIN_SCHEMA)


async def drain(stream: AsyncIterator[ListenEvent], into: list[ListenEvent]) -> None:
    async for event in stream:
        into.append(event)


async def listen(script: Any, **client_kwargs: Any) -> tuple[list[ListenEvent], BaseException | None]:
    """Run a listen stream to its end; return what it yielded and what it raised (if anything)."""
    events: list[ListenEvent] = []
    timeouts = client_kwargs.pop("timeouts", FAST)
    async with (
        asyncio.timeout(HANG_GUARD),
        HostileServer(script) as server,
        McpClient(server.url, timeouts=timeouts, **client_kwargs) as client,
    ):
        try:
            await drain(client.listen([TASK_ID], subscription_id=SUB), events)
        except McpError as exc:
            return events, exc
    return events, None


def ack(task_ids: Any = (TASK_ID,), sub: Any = SUB) -> Message:
    return notification(
        "notifications/subscriptions/acknowledged", {"notifications": {"taskIds": task_ids}}, sub
    )


def notification(method: str, params: Message, sub: Any = SUB) -> Message:
    meta = {} if sub is None else {"_meta": {LISTEN_META: sub}}
    return {"jsonrpc": "2.0", "method": method, "params": {**params, **meta}}


def pushed(sub: Any = SUB, **fields: Any) -> Message:
    return notification("notifications/tasks", task(**fields), sub)


def listen_end(sub: Any = SUB) -> Message:
    return {"jsonrpc": "2.0", "id": sub, "result": {"resultType": "complete", "_meta": {LISTEN_META: sub}}}


def sse_script(*parts: Any, end: str = "eof", status: int = 200) -> Any:
    """A script answering with SSE; a dict part is made into an event, a callable gets the message."""

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        chunks: list[bytes | float] = []
        for part in parts:
            if callable(part):
                part = part(message)
            chunks.append(sse_event(part) if isinstance(part, dict) else part)
        return await sse_reply(request, chunks, end=end, status=status)

    return script


def task_answer(**fields: Any) -> Any:
    return answering(lambda m: json_reply(response(m, {"resultType": "complete", **task(**fields)})))


# --- the JSON-RPC envelope of a tasks/get answer ---------------------------------------------

ENVELOPE_CASES = [
    pytest.param(lambda m: raw_reply(b'{"jsonrpc": "2.0", "id": '), "not valid JSON", id="truncated-json"),
    pytest.param(lambda m: raw_reply(b"<html>oops</html>"), "not valid JSON", id="html-labelled-json"),
    pytest.param(lambda m: raw_reply(b""), "not valid JSON", id="empty-body"),
    pytest.param(lambda m: raw_reply(b'{"id": 1, "result": {"taskId": "\xff\xfe"}}'), "JSON", id="bad-utf8"),
    pytest.param(lambda m: raw_reply(b"[1, 2, 3]"), "not a JSON object", id="json-array"),
    pytest.param(lambda m: raw_reply(b'"hello"'), "not a JSON object", id="json-string"),
    pytest.param(lambda m: json_reply({"jsonrpc": "2.0", "id": m["id"]}), "result is null", id="no-result"),
    pytest.param(lambda m: json_reply(response(m, "ok")), "result is a string", id="result-string"),
    pytest.param(lambda m: json_reply(response(m, [task()])), "result is an array", id="result-array"),
    pytest.param(
        lambda m: json_reply({"jsonrpc": "2.0", "id": m["id"] + 100, "result": task()}),
        "does not match",
        id="id-mismatch",
    ),
    pytest.param(
        lambda m: json_reply({"jsonrpc": "2.0", "id": str(m["id"]), "result": task()}),
        "does not match",
        id="id-as-string",
    ),
    pytest.param(
        lambda m: json_reply({"jsonrpc": "2.0", "result": task()}), "does not match", id="id-missing"
    ),
    pytest.param(
        lambda m: json_reply({"jsonrpc": "2.0", "id": m["id"], "error": "nope"}), "result", id="error-string"
    ),
    pytest.param(
        lambda m: json_reply(response(m, {**task(), "resultType": "input_required"})),
        "resultType",
        id="resultType-not-complete",
    ),
    pytest.param(
        lambda m: raw_reply(b'{"jsonrpc":"2.0","id":1,"result":{"ttlMs":' + b"9" * 5000 + b"}}"),
        "not valid JSON",
        id="int-over-4300-digits",
    ),
    pytest.param(
        lambda m: raw_reply(b"[" * 100_000 + b"]" * 100_000),
        "JSON",
        id="nested-100k-deep",
    ),
]


@pytest.mark.parametrize(("answer", "named"), ENVELOPE_CASES)
async def test_a_malformed_envelope_is_an_invalid_response(answer: Answer, named: str) -> None:
    exc = await get_task_fails(InvalidResponse, answering(answer))
    assert named in str(exc)
    assert "tasks/get" in str(exc)


async def test_a_response_id_true_does_not_match_request_id_1() -> None:
    script = answering(lambda m: json_reply({"jsonrpc": "2.0", "id": True, "result": DISCOVERY}))
    async with (
        HostileServer(script, answer_discover=False) as server,
        McpClient(server.url, timeouts=FAST) as client,
    ):
        exc = await raises(InvalidResponse, client.discover())
        assert server.messages[0]["id"] == 1
    assert "does not match" in str(exc)


@pytest.mark.parametrize(
    ("result", "named"),
    [
        pytest.param(
            {**DISCOVERY, "capabilities": "all"}, "capabilities is not an object", id="capabilities-string"
        ),
        pytest.param("modern", "server/discover result is a string", id="result-string"),
    ],
)
async def test_a_malformed_discovery_is_named(result: Any, named: str) -> None:
    script = answering(lambda m: json_reply(response(m, result)))
    async with (
        HostileServer(script, answer_discover=False) as server,
        McpClient(server.url, timeouts=FAST) as client,
    ):
        exc = await raises(InvalidResponse, client.discover())
    assert named in str(exc)


# --- the fields of a DetailedTask -------------------------------------------------------------

ELICIT = {"method": "elicitation/create", "params": {"mode": "form", "message": "Name?"}}

TASK_FIELD_CASES = [
    pytest.param({"taskId": DROP}, "taskId is missing", id="taskId-missing"),
    pytest.param({"taskId": 42}, "taskId is a number", id="taskId-number"),
    pytest.param({"taskId": ""}, "taskId must be 1 to", id="taskId-empty"),
    pytest.param({"taskId": "x" * 1025}, "taskId must be 1 to", id="taskId-too-long"),
    pytest.param({"taskId": "someone-elses"}, "different taskId", id="taskId-other"),
    pytest.param({"status": "exploded"}, "status is 'exploded'", id="status-exploded"),
    pytest.param({"status": None}, "status is None", id="status-null"),
    pytest.param({"status": 42}, "status is 42", id="status-42"),
    pytest.param({"status": DROP}, "status is None", id="status-missing"),
    pytest.param({"status": "WORKING"}, "status", id="status-uppercase"),
    pytest.param(
        {"status": ["working"]},
        "status",
        id="status-array",
    ),
    pytest.param(
        {"status": {"state": "working"}},
        "status",
        id="status-object",
    ),
    pytest.param({"status": "input_required"}, "inputRequests is null", id="input-required-no-requests"),
    pytest.param(
        {"status": "input_required", "inputRequests": [ELICIT]},
        "inputRequests is an array",
        id="requests-list",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {"k1": {"params": {}}}},
        "['k1'].method is missing",
        id="request-without-method",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {"k1": "elicit"}},
        "['k1'] is a string",
        id="request-a-string",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {"k1": {"method": 7}}},
        "method is a number",
        id="request-method-number",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {"k1": {**ELICIT, "params": "x"}}},
        "['k1'].params is a string",
        id="request-params-string",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {"": ELICIT}},
        "key of length 0",
        id="request-empty-key",
    ),
    pytest.param(
        {"status": "input_required", "inputRequests": {f"k{i}": ELICIT for i in range(101)}},
        "more than 100",
        id="requests-101",
    ),
    pytest.param({"status": "completed"}, "result.result is null", id="completed-no-result"),
    pytest.param({"status": "completed", "result": "done"}, "result.result is a string", id="result-string"),
    pytest.param(
        {"status": "completed", "result": {"content": "done"}},
        "result.content is a string",
        id="content-string",
    ),
    pytest.param(
        {"status": "completed", "result": {"content": ["done"]}}, "result.content", id="content-of-strings"
    ),
    pytest.param(
        {"status": "completed", "result": {"content": [], "isError": "false"}},
        "isError is a string",
        id="isError-string",
    ),
    pytest.param({"status": "failed"}, "result.error is null", id="failed-no-error"),
    pytest.param(
        {"status": "failed", "error": {"code": "E42", "message": "x"}},
        "error.code is a string",
        id="code-string",
    ),
    pytest.param(
        {"status": "failed", "error": {"code": True, "message": "x"}},
        "error.code is a boolean",
        id="code-bool",
    ),
    pytest.param(
        {"status": "failed", "error": {"code": -32603, "message": 5}},
        "error.message",
        id="error-message-number",
    ),
    pytest.param({"ttlMs": "soon"}, "ttlMs is 'soon'", id="ttl-soon"),
    pytest.param({"ttlMs": -1}, "ttlMs is -1", id="ttl-negative"),
    pytest.param({"ttlMs": 1.5}, "ttlMs is 1.5", id="ttl-float"),
    pytest.param({"ttlMs": True}, "ttlMs is True", id="ttl-bool"),
    pytest.param({"ttlMs": float("nan")}, "ttlMs is nan", id="ttl-NaN"),
    pytest.param({"ttlMs": float("inf")}, "ttlMs is inf", id="ttl-Infinity"),
    pytest.param({"pollIntervalMs": "1.5"}, "pollIntervalMs is '1.5'", id="poll-float-string"),
    pytest.param({"pollIntervalMs": -5}, "pollIntervalMs is -5", id="poll-negative"),
    pytest.param({"createdAt": DROP}, "createdAt is missing", id="createdAt-missing"),
    pytest.param({"lastUpdatedAt": 0}, "lastUpdatedAt is a number", id="lastUpdatedAt-number"),
    pytest.param({"statusMessage": 7}, "statusMessage is a number", id="statusMessage-number"),
]


@pytest.mark.parametrize(("fields", "named"), TASK_FIELD_CASES)
async def test_a_malformed_task_field_is_named(fields: dict[str, Any], named: str) -> None:
    exc = await get_task_fails(InvalidResponse, task_answer(**fields))
    assert named in str(exc)


async def test_a_100kb_status_message_is_kept_verbatim() -> None:
    message = "🚀 ünïcode and \u202e bidi " + "x" * 100_000
    got = await get_task(task_answer(statusMessage=message))
    assert isinstance(got, WorkingTask)
    assert got.status_message == message


async def test_unknown_extra_fields_are_kept_in_raw() -> None:
    got = await get_task(task_answer(status="completed", result={"content": []}, surprise={"nested": [1, 2]}))
    assert isinstance(got, CompletedTask)
    assert got.raw["surprise"] == {"nested": [1, 2]}


@pytest.mark.parametrize("method", ["update_task", "cancel_task"])
@pytest.mark.parametrize(
    ("result", "named"),
    [
        pytest.param("ok", "result is a string", id="result-string"),
        pytest.param({"resultType": "input_required"}, "resultType is 'input_required'", id="resultType"),
    ],
)
async def test_a_malformed_update_or_cancel_ack_is_named(method: str, result: Any, named: str) -> None:
    script = answering(lambda m: json_reply(response(m, result)))
    async with HostileServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        call = (
            client.update_task(TASK_ID, {"k1": {}})
            if method == "update_task"
            else client.cancel_task(TASK_ID)
        )
        exc = await raises(InvalidResponse, call)
    assert named in str(exc)
    assert ("tasks/update" if method == "update_task" else "tasks/cancel") in str(exc)


def tools_page(tools: Any, cursor: Any = None) -> Message:
    return {"tools": tools} if cursor is None else {"tools": tools, "nextCursor": cursor}


@pytest.mark.parametrize(
    ("page", "named"),
    [
        pytest.param(tools_page({"name": "t"}), "result.tools is not an array", id="tools-object"),
        pytest.param(tools_page([{"name": 5}]), "tools[0].name is a number", id="name-number"),
        pytest.param(tools_page(["t"]), "tools[0] is a string", id="tool-string"),
        pytest.param(
            tools_page([{"name": "t", "inputSchema": "any"}]), "tools[0].inputSchema is a string", id="schema"
        ),
        pytest.param(tools_page([], cursor=7), "nextCursor is not a string", id="cursor-number"),
        pytest.param(tools_page([], cursor="again"), "more than 100 pages", id="endless-pages"),
    ],
)
async def test_a_malformed_tools_list_is_named(page: Message, named: str) -> None:
    script = answering(lambda m: json_reply(response(m, page)))
    async with HostileServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        exc = await raises(InvalidResponse, client.list_tools())
    assert named in str(exc)


# --- tools/call outcomes ------------------------------------------------------------------------

CALL_CASES = [
    pytest.param({"resultType": "banana"}, "resultType is 'banana'", id="resultType-banana"),
    pytest.param({"resultType": 3}, "resultType is 3", id="resultType-number"),
    pytest.param(
        {"resultType": "input_required"}, "neither inputRequests nor requestState", id="input-required-empty"
    ),
    pytest.param(
        {"resultType": "input_required", "requestState": 5}, "requestState is a number", id="state-number"
    ),
    pytest.param(
        {"resultType": "input_required", "requestState": "s", "inputRequests": ["x"]},
        "inputRequests is an array",
        id="input-requests-list",
    ),
    pytest.param(
        {"resultType": "task", **task(status=DROP)}, "result.status is None", id="task-without-status"
    ),
    pytest.param(
        {"resultType": "task", **task(taskId=DROP)}, "result.taskId is missing", id="task-without-id"
    ),
    pytest.param(
        {"resultType": "complete", "content": {"type": "text"}}, "content is an object", id="content-obj"
    ),
]


@pytest.mark.parametrize(("result", "named"), CALL_CASES)
async def test_a_malformed_call_outcome_is_named(result: Message, named: str) -> None:
    exc = await raises(InvalidResponse, call_tool(answering(lambda m: json_reply(response(m, result)))))
    assert named in str(exc)


async def test_well_formed_call_outcomes_still_parse() -> None:
    """The control for the table above: the same server shapes, correct, come through typed."""
    created = await call_tool(answering(lambda m: json_reply(response(m, {"resultType": "task", **task()}))))
    assert isinstance(created, TaskCreated)
    assert created.task.task_id == TASK_ID
    rounds = await call_tool(
        answering(lambda m: json_reply(response(m, {"resultType": "input_required", "requestState": "s1"})))
    )
    assert isinstance(rounds, InputRequired)
    assert rounds.request_state == "s1"


# --- JSON-RPC error objects -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "named"),
    [
        pytest.param({"code": "-32603", "message": "x"}, "code='-32603'", id="code-string"),
        pytest.param({"code": 1.5, "message": "x"}, "code=1.5", id="code-float"),
        pytest.param({"code": True, "message": "x"}, "code=True", id="code-bool"),
        pytest.param({"message": "x"}, "code=None", id="code-missing"),
        pytest.param({"code": -32603, "message": ["x"]}, "malformed JSON-RPC error", id="message-array"),
    ],
)
@pytest.mark.parametrize("status", [200, 400])
async def test_a_malformed_error_object_is_an_invalid_response(
    error: Message, named: str, status: int
) -> None:
    body = answering(lambda m: json_reply({"jsonrpc": "2.0", "id": m["id"], "error": error}, status=status))
    exc = await get_task_fails(InvalidResponse, body)
    assert named in str(exc)


async def test_a_json_rpc_error_is_read_before_the_http_status() -> None:
    data = {"taskId": TASK_ID, "reason": "expired"}
    exc = await get_task_fails(
        ProtocolError, answering(lambda m: json_reply(rpc_error(m, -32602, "Unknown task", data), status=400))
    )
    assert (exc.code, exc.message, exc.data, exc.status) == (-32602, "Unknown task", data, 400)
    assert exc.is_not_found
    assert "-32602" in str(exc) and "Unknown task" in str(exc)


async def test_internal_error_with_http_200_is_a_protocol_error() -> None:
    exc = await get_task_fails(
        ProtocolError, answering(lambda m: json_reply(rpc_error(m, -32603, "db down")))
    )
    assert (exc.code, exc.status) == (-32603, 200)
    assert "internal error" in str(exc)


async def test_method_not_found_with_http_404_is_a_protocol_error_not_a_transport_error() -> None:
    exc = await get_task_fails(
        ProtocolError, answering(lambda m: json_reply(rpc_error(m, -32601, "Method not found"), status=404))
    )
    assert (exc.code, exc.status) == (-32601, 404)


@pytest.mark.parametrize("code", [-32021, -32003])
async def test_missing_capability_in_either_numbering(code: int) -> None:
    data: dict[str, Any] = {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    exc = await get_task_fails(
        ProtocolError, answering(lambda m: json_reply(rpc_error(m, code, "declare tasks", data), status=400))
    )
    assert exc.code == code
    assert exc.is_missing_capability


async def test_an_error_message_of_a_megabyte_is_cut_to_2000_characters() -> None:
    exc = await get_task_fails(
        ProtocolError, answering(lambda m: json_reply(rpc_error(m, -32603, "e" * 1_000_000)))
    )
    assert exc.message == "e" * 2000


async def test_an_error_on_an_sse_stream_is_a_protocol_error() -> None:
    exc = await get_task_fails(ProtocolError, sse_script(lambda m: rpc_error(m, -32602, "Unknown task")))
    assert exc.code == -32602


async def test_a_malformed_error_on_an_sse_stream_is_an_invalid_response() -> None:
    exc = await get_task_fails(InvalidResponse, sse_script(lambda m: rpc_error(m, "bad", "Unknown task")))
    assert "code='bad'" in str(exc)


# --- bodies larger than the cap -----------------------------------------------------------------

CAP = 4096


async def test_a_declared_content_length_above_the_cap() -> None:
    big = answering(lambda m: json_reply(response(m, task(statusMessage="x" * 10 * CAP))))
    exc = await get_task_fails(InvalidResponse, big, max_body_bytes=CAP)
    assert f"exceeds {CAP}" in str(exc)


async def test_a_huge_content_length_is_refused_without_waiting_for_the_body() -> None:
    """The server declares a terabyte and sends nothing: the header alone must end the exchange."""

    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
        )
        await writer.drain()
        await asyncio.Event().wait()

    slow = Timeouts(connect=2.0, read=60.0, request=60.0)
    async with (
        RawServer(script) as server,
        McpClient(server.url, timeouts=slow, max_body_bytes=CAP) as client,
    ):
        exc = await raises(InvalidResponse, client.get_task(TASK_ID))
    assert "1000000000000 bytes exceeds" in str(exc)


async def test_a_chunked_body_that_grows_past_the_cap(transport: Callable[[], Any]) -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "application/json"})
        stream.enable_chunked_encoding()
        await stream.prepare(request)
        await stream.write(b'{"jsonrpc":"2.0","id":%d,"result":{"statusMessage":"' % message["id"])
        for _ in range(64):
            await stream.write(b"y" * 1024)
        return stream

    exc = await get_task_fails(InvalidResponse, script, max_body_bytes=CAP, transport=transport())
    assert f"exceeds {CAP} bytes" in str(exc)


async def test_an_error_page_larger_than_the_cap() -> None:
    page = answering(lambda m: raw_reply(b"<p>" * 10 * CAP, status=502, content_type="text/html"))
    exc = await get_task_fails(InvalidResponse, page, max_body_bytes=CAP)
    assert "exceeds" in str(exc)


async def test_an_sse_event_larger_than_the_cap() -> None:
    big = sse_script(lambda m: response(m, task(statusMessage="z" * 2 * CAP)))
    exc = await get_task_fails(InvalidResponse, big, max_body_bytes=CAP)
    assert f"SSE event exceeds {CAP}" in str(exc)


async def test_an_sse_event_of_many_small_data_lines_larger_than_the_cap() -> None:
    lines = b"".join(b"data: " + b"w" * 100 + b"\n" for _ in range(100))
    exc = await get_task_fails(InvalidResponse, sse_script(lines), max_body_bytes=CAP)
    assert f"SSE event exceeds {CAP}" in str(exc)


async def test_an_sse_line_that_never_ends_is_capped() -> None:
    endless = sse_script(*[b"data: " + b"v" * 1024 for _ in range(16)], end="hang")
    exc = await get_task_fails(InvalidResponse, endless, max_body_bytes=CAP)
    assert f"SSE event exceeds {CAP}" in str(exc)


async def test_many_events_each_under_the_cap_are_fine() -> None:
    """The cap is per event, not per stream: a chatty stream with a late answer still succeeds."""
    chatter = [
        notification("notifications/progress", {"progress": i, "pad": "p" * 200}, None) for i in range(100)
    ]
    got = await get_task(sse_script(*chatter, lambda m: response(m, task())), max_body_bytes=CAP)
    assert got.task_id == TASK_ID


# --- SSE framing -------------------------------------------------------------------------------------


def answer_json(message: Message) -> bytes:
    return json.dumps(response(message, task(statusMessage="via sse"))).encode()


SSE_OK_CASES = [
    pytest.param(lambda m: [sse_event(response(m, task(statusMessage="via sse")))], id="plain"),
    pytest.param(lambda m: [b"event: message\r\ndata: " + answer_json(m) + b"\r\n\r\n"], id="crlf"),
    pytest.param(lambda m: [b"data: " + answer_json(m) + b"\r\r: bye\r\r"], id="bare-cr"),
    pytest.param(
        lambda m: [b"data: " + answer_json(m) + b"\r\r"],
        id="bare-cr-at-eof",
    ),
    pytest.param(lambda m: [b"data:" + answer_json(m) + b"\n\n"], id="no-space-after-colon"),
    pytest.param(
        lambda m: [b"data: " + answer_json(m).replace(b", ", b",\ndata: ") + b"\n\n"], id="multi-line-data"
    ),
    pytest.param(
        lambda m: [
            b": ping\n\n",
            b":\n\n",
            b": keep-alive\r\n\r\n",
            sse_event(response(m, task(statusMessage="via sse"))),
        ],
        id="keep-alive-comments",
    ),
    pytest.param(
        lambda m: [
            sse_event(notification("notifications/progress", {"progressToken": 1, "progress": 3}, None)),
            sse_event(notification("notifications/message", {"level": "info", "data": "hi"}, None)),
            sse_event(response(m, task(statusMessage="via sse"))),
        ],
        id="notifications-first",
    ),
    pytest.param(
        lambda m: [
            sse_event({"jsonrpc": "2.0", "id": m["id"], "method": "sampling/createMessage", "params": {}}),
            sse_event({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}),
            sse_event(response(m, task(statusMessage="via sse"))),
        ],
        id="server-request-ignored",
    ),
    pytest.param(
        lambda m: [
            sse_event({"jsonrpc": "2.0", "id": m["id"] + 1, "result": {"stale": True}}),
            sse_event(response(m, task(statusMessage="via sse"))),
        ],
        id="other-id-response-skipped",
    ),
    pytest.param(
        lambda m: [
            b"event: endpoint\ndata: not json at all\n\n",
            sse_event(response(m, task(statusMessage="via sse"))),
        ],
        id="other-event-type-skipped",
    ),
    pytest.param(
        lambda m: [b"id: 41\nretry: 1000\n" + sse_event(response(m, task(statusMessage="via sse")))],
        id="id-and-retry-ignored",
    ),
    pytest.param(
        lambda m: [b"id: 0\nretry: 3000\ndata: \n\n", sse_event(response(m, task(statusMessage="via sse")))],
        id="priming-event",
    ),
    pytest.param(
        lambda m: [bytes([b]) for b in sse_event(response(m, task(statusMessage="via sse")), eol=b"\r\n")],
        id="byte-by-byte-crlf",
    ),
    pytest.param(
        lambda m: [sse_event(response(m, task(statusMessage="via sse"))), sse_event({"after": "the answer"})],
        id="junk-after-answer-unread",
    ),
]


@pytest.mark.parametrize("events", SSE_OK_CASES)
async def test_sse_framing_variants_deliver_the_answer(events: Callable[[Message], list[bytes]]) -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return await sse_reply(request, events(message))

    got = await get_task(script)
    assert got.status_message == "via sse"


async def test_sse_cut_mid_frame_then_closed_is_stream_dropped(transport: Callable[[], Any]) -> None:
    cut = sse_script(lambda m: b'data: {"jsonrpc":"2.0","id":' + str(m["id"]).encode() + b',"res')
    exc = await get_task_fails(StreamDropped, cut, transport=transport())
    assert "cut mid-event" in str(exc)
    assert "outcome is unknown" in str(exc)


async def test_sse_data_line_without_blank_line_is_stream_dropped() -> None:
    """A complete data line whose event is never terminated: the answer was not delivered."""
    unterminated = sse_script(lambda m: b"data: " + answer_json(m) + b"\n")
    exc = await get_task_fails(StreamDropped, unterminated)
    assert "cut mid-event" in str(exc)


@pytest.mark.parametrize(
    "transport_kind",
    [
        pytest.param(
            "aiohttp",
        ),
        pytest.param(
            "httpx",
        ),
    ],
)
async def test_sse_connection_dropped_mid_frame_is_stream_dropped(transport_kind: str) -> None:
    """The TCP connection dies inside an event (no final chunk): the tools/call outcome is unknown."""
    cut = sse_script(
        lambda m: b'data: {"jsonrpc":"2.0","id":' + str(m["id"]).encode() + b',"res', end="abort"
    )
    chosen = None if transport_kind == "aiohttp" else httpx.AsyncHTTPTransport()
    exc = await raises(TransportError, call_tool(cut, transport=chosen))
    assert isinstance(exc, StreamDropped), f"{type(exc).__name__}: {exc}"


async def test_sse_that_ends_without_the_response_is_stream_dropped() -> None:
    only_chatter = sse_script(notification("notifications/progress", {"progress": 1}, None), b": bye\n\n")
    exc = await get_task_fails(StreamDropped, only_chatter)
    assert "ended without a response" in str(exc)
    assert "cut mid-event" not in str(exc)


async def test_an_empty_sse_stream_is_stream_dropped() -> None:
    exc = await get_task_fails(StreamDropped, sse_script())
    assert "without a response" in str(exc)


async def test_a_non_json_sse_event_is_an_invalid_response() -> None:
    exc = await get_task_fails(InvalidResponse, sse_script(b"data: {oops\n\n"))
    assert "SSE event is not a JSON object" in str(exc)


async def test_a_json_array_sse_event_is_an_invalid_response() -> None:
    exc = await get_task_fails(InvalidResponse, sse_script(b"data: [1]\n\n"))
    assert "SSE event is not a JSON object" in str(exc)


async def test_an_sse_line_of_invalid_utf8_is_an_invalid_response() -> None:
    exc = await get_task_fails(InvalidResponse, sse_script(b"data: \xff\xfe\n\n"))
    assert "UTF-8" in str(exc)


async def test_a_malformed_task_on_an_sse_stream_is_named() -> None:
    exc = await get_task_fails(InvalidResponse, sse_script(lambda m: response(m, task(status="exploded"))))
    assert "status is 'exploded'" in str(exc)


# --- hang safety ----------------------------------------------------------------------------------


async def test_a_server_that_accepts_and_never_answers(transport: Callable[[], Any]) -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with (
        RawServer(script) as server,
        McpClient(server.url, timeouts=FAST, transport=transport()) as client,
    ):
        exc = await raises(TransportError, client.get_task(TASK_ID))
    assert type(exc) is TransportError
    assert "timeout" in str(exc).lower()
    assert not exc.permanent


async def test_a_call_sent_but_never_answered_is_not_called_unreachable() -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with RawServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        exc = await raises(
            TransportError, client.call_tool("slow_count", {"n": 5}, input_schema=PLAIN_SCHEMA)
        )
        assert [m["method"] for m in server.messages] == ["server/discover", "tools/call"]
    assert "cannot reach" not in str(exc)


async def test_an_sse_stream_that_pings_forever_ends_at_the_request_deadline() -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return await ping_forever(request)

    exc = await get_task_fails(TransportError, script)
    assert type(exc) is TransportError
    assert "no complete answer within 1 s" in str(exc)


async def test_a_json_body_that_trickles_forever_ends_at_the_request_deadline() -> None:
    """One byte every 0.1 s never trips the read timeout; the whole-exchange deadline must. The
    read timeout is 5 s here: with FAST's 0.5 s, a loaded machine that held this process's loop
    (server and client) for half a second gave 'timed out waiting for data' instead."""

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "application/json"})
        await stream.prepare(request)
        while True:
            await stream.write(b" ")
            await asyncio.sleep(0.1)

    exc = await get_task_fails(TransportError, script, timeouts=dataclasses.replace(FAST, read=5.0))
    assert "no complete answer within 1 s" in str(exc)


async def test_a_tools_call_that_pings_forever_ends_at_the_call_deadline() -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return await ping_forever(request)

    exc = await raises(TransportError, call_tool(script))
    assert "tools/call: no complete answer within 1 s" in str(exc)


async def test_a_listen_stream_that_goes_silent_is_stream_dropped(transport: Callable[[], Any]) -> None:
    events, exc = await listen(sse_script(ack(), pushed(), end="hang"), transport=transport())
    assert isinstance(events[0], ListenAck)
    assert isinstance(events[1], WorkingTask)
    assert isinstance(exc, StreamDropped)
    assert "silent for 0.5 s" in str(exc)


async def test_a_listen_that_never_sends_headers_is_a_transport_error() -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    async with RawServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        exc = await raises(TransportError, drain(client.listen([TASK_ID]), []))
    assert "timeout" in str(exc).lower()


async def test_a_listen_refusal_whose_body_trickles_forever_does_not_hang() -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        stream = web.StreamResponse(status=503, headers={"Content-Type": "text/plain"})
        await stream.prepare(request)
        while True:
            await stream.write(b".")
            await asyncio.sleep(0.1)

    async with (
        asyncio.timeout(2.5),
        HostileServer(script) as server,
        McpClient(server.url, timeouts=FAST) as client,
    ):
        with pytest.raises(TransportError):
            await drain(client.listen([TASK_ID]), [])


# --- HTTP errors without a JSON-RPC body ----------------------------------------------------------


async def test_401_names_the_credentials_and_the_challenge() -> None:
    challenge = 'Bearer resource_metadata="https://as.example/.well-known/oauth-protected-resource"'
    page = answering(
        lambda m: raw_reply(
            b"no", status=401, content_type="text/plain", headers={"WWW-Authenticate": challenge}
        )
    )
    exc = await get_task_fails(TransportError, page)
    assert (exc.permanent, exc.status) == (True, 401)
    assert "credentials refused" in str(exc)
    assert "resource_metadata" in str(exc)


async def test_403_is_permanent() -> None:
    exc = await get_task_fails(
        TransportError,
        answering(lambda m: raw_reply(b"Invalid Origin header", status=403, content_type="text/plain")),
    )
    assert (exc.permanent, exc.status) == (True, 403)
    assert "HTTP 403" in str(exc)


async def test_404_without_json_is_permanent() -> None:
    exc = await get_task_fails(
        TransportError, answering(lambda m: raw_reply(b"Not Found", status=404, content_type="text/plain"))
    )
    assert type(exc) is TransportError
    assert (exc.permanent, exc.status) == (True, 404)
    assert "HTTP 404: Not Found" in str(exc)


async def test_503_with_retry_after_seconds() -> None:
    page = answering(
        lambda m: raw_reply(b"busy", status=503, content_type="text/plain", headers={"Retry-After": "7"})
    )
    exc = await get_task_fails(TransportError, page)
    assert (exc.permanent, exc.status, exc.retry_after) == (False, 503, 7.0)
    assert "HTTP 503" in str(exc)


async def test_503_with_retry_after_as_a_date() -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    page = answering(
        lambda m: raw_reply(b"", status=503, content_type="text/plain", headers={"Retry-After": when})
    )
    exc = await get_task_fails(TransportError, page)
    assert exc.retry_after is not None and 0 < exc.retry_after <= 121


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("soon", id="word"),
        pytest.param("-5", id="negative"),
        pytest.param("1e9", id="exponent"),
        pytest.param("Mon, 99 Foo 2026 25:61:61 GMT", id="bad-date"),
        pytest.param(
            "²",
            id="superscript-two",
        ),
    ],
)
async def test_a_garbage_retry_after_is_ignored(value: str) -> None:
    page = answering(
        lambda m: raw_reply(b"", status=503, content_type="text/plain", headers={"Retry-After": value})
    )
    exc = await get_task_fails(TransportError, page)
    assert (exc.status, exc.retry_after) == (503, None)


async def test_a_redirect_is_permanent_and_names_the_location() -> None:
    page = answering(
        lambda m: raw_reply(
            b"", status=302, content_type="text/plain", headers={"Location": "https://elsewhere.example/mcp"}
        )
    )
    exc = await get_task_fails(TransportError, page)
    assert (exc.permanent, exc.status) == (True, 302)
    assert "redirect to 'https://elsewhere.example/mcp'" in str(exc)


async def test_500_is_transient_and_quotes_the_page() -> None:
    page = answering(lambda m: raw_reply(b"upstream\x00 exploded\n", status=500, content_type="text/plain"))
    exc = await get_task_fails(TransportError, page)
    assert (exc.permanent, exc.status) == (False, 500)
    assert "HTTP 500: upstream  exploded" in str(exc)


async def test_200_html_is_an_invalid_response_saying_it_is_a_web_page() -> None:
    page = answering(
        lambda m: raw_reply(b"<html>captive portal</html>", content_type="text/html; charset=utf-8")
    )
    exc = await get_task_fails(InvalidResponse, page)
    assert "HTTP 200 with an HTML page, not an MCP endpoint's answer" in str(exc)


async def test_200_of_another_type_is_an_invalid_response_naming_the_content_type() -> None:
    exc = await get_task_fails(
        InvalidResponse, answering(lambda m: raw_reply(b"hi", content_type="text/plain"))
    )
    assert "HTTP 200 with content type 'text/plain'" in str(exc)


async def test_202_empty_is_an_invalid_response() -> None:
    exc = await get_task_fails(InvalidResponse, answering(lambda m: web.Response(status=202)))
    assert "HTTP 202" in str(exc)


async def test_connection_refused_is_transient(transport: Callable[[], Any]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    async with McpClient(url, timeouts=FAST, transport=transport()) as client:
        exc = await raises(TransportError, client.get_task(TASK_ID))
    assert type(exc) is TransportError
    assert not exc.permanent
    assert "cannot reach" in str(exc)


@pytest.mark.parametrize(
    "transport_kind",
    [
        pytest.param("aiohttp"),
        "httpx",
    ],
)
async def test_a_garbage_status_line_is_a_transport_error(transport_kind: str) -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HELLO I AM NOT HTTP\r\n\r\n")
        await writer.drain()

    chosen = None if transport_kind == "aiohttp" else httpx.AsyncHTTPTransport()
    async with RawServer(script) as server, McpClient(server.url, timeouts=FAST, transport=chosen) as client:
        exc = await raises(McpError, client.get_task(TASK_ID))
    assert isinstance(exc, TransportError)


async def test_a_server_that_hangs_up_is_not_reported_as_a_timeout(transport: Callable[[], Any]) -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    async with (
        RawServer(script) as server,
        McpClient(server.url, timeouts=FAST, transport=transport()) as client,
    ):
        exc = await raises(TransportError, client.get_task(TASK_ID))
    assert not exc.permanent
    assert "timed out" not in str(exc)


# --- subscriptions/listen --------------------------------------------------------------------------


async def test_listen_404_is_unsupported() -> None:
    events, exc = await listen(answering(lambda m: raw_reply(b"", status=404, content_type="text/plain")))
    assert events == []
    assert isinstance(exc, ListenUnsupported)
    assert "poll instead" in str(exc)


@pytest.mark.parametrize("status", [200, 404])
async def test_listen_method_not_found_is_unsupported(status: int) -> None:
    events, exc = await listen(
        answering(lambda m: json_reply(rpc_error(m, -32601, "Method not found"), status=status))
    )
    assert events == []
    assert isinstance(exc, ListenUnsupported)


async def test_listen_missing_capability_is_a_protocol_error() -> None:
    events, exc = await listen(
        answering(lambda m: json_reply(rpc_error(m, -32021, "declare tasks"), status=400))
    )
    assert events == []
    assert isinstance(exc, ProtocolError)
    assert exc.is_missing_capability


async def test_listen_answered_with_plain_json_is_an_invalid_response() -> None:
    events, exc = await listen(answering(lambda m: json_reply(response(m, {"resultType": "complete"}))))
    assert events == []
    assert isinstance(exc, InvalidResponse)
    assert "without an SSE stream" in str(exc)


async def test_listen_refused_with_a_malformed_error_is_an_invalid_response() -> None:
    events, exc = await listen(answering(lambda m: json_reply(rpc_error(m, "nope"), status=400)))
    assert events == []
    assert isinstance(exc, InvalidResponse)
    assert "code='nope'" in str(exc)


async def test_listen_406_is_a_permanent_transport_error() -> None:
    events, exc = await listen(answering(lambda m: raw_reply(b"", status=406, content_type="text/plain")))
    assert events == []
    assert isinstance(exc, TransportError)
    assert (exc.permanent, exc.status) == (True, 406)
    assert "subscriptions/listen: HTTP 406" in str(exc)


async def test_listen_refusal_cut_mid_body_is_a_typed_error() -> None:
    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nbus"
        )
        await writer.drain()

    async with RawServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        await raises(TransportError, drain(client.listen([TASK_ID]), []))


@pytest.mark.parametrize("then", ["close", "stall"])
async def test_a_small_answer_cut_or_stalled_mid_body_is_a_transport_error(then: str) -> None:
    """The default transport reads a small answer of known length whole before handing it over
    (every tasks/get): a body cut short or stalled is still a transport error with the outcome
    unknown, never an empty or invalid answer."""

    async def script(message: Message, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"jsonrpc":"2.0"'
        )
        await writer.drain()
        if then == "stall":
            await asyncio.Event().wait()

    async with RawServer(script) as server, McpClient(server.url, timeouts=FAST) as client:
        exc = await raises(TransportError, client.get_task(TASK_ID))
    assert "the outcome is unknown" in str(exc)


async def test_a_task_frame_before_the_ack_is_an_invalid_response() -> None:
    events, exc = await listen(sse_script(pushed(), ack(), end="hang"))
    assert events == []
    assert isinstance(exc, InvalidResponse)
    assert "before the acknowledgement" in str(exc)


async def test_frames_for_another_subscription_are_skipped() -> None:
    events, exc = await listen(
        sse_script(
            ack(sub="listen-someone-else"),
            ack(),
            pushed(sub="listen-someone-else", status="exploded"),
            pushed(sub="listen-someone-else", statusMessage="not yours"),
            listen_end(sub="listen-someone-else"),
            pushed(statusMessage="yours"),
            listen_end(),
        )
    )
    assert exc is None
    assert [type(e) for e in events] == [ListenAck, WorkingTask, ListenEnded]
    assert isinstance(events[1], WorkingTask)
    assert events[1].status_message == "yours"


async def test_a_garbage_status_task_frame_is_an_invalid_response() -> None:
    events, exc = await listen(sse_script(ack(), pushed(status="exploded"), end="hang"))
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, InvalidResponse)
    assert "notifications/tasks params.status is 'exploded'" in str(exc)


async def test_graceful_end_yields_listen_ended_then_stops() -> None:
    done = {"status": "completed", "result": {"content": [{"type": "text", "text": "5"}]}}
    events, exc = await listen(
        sse_script(
            ack(),
            b": ping\n\n",
            pushed(),
            pushed(**done),
            listen_end(),
            pushed(statusMessage="after"),
            end="hang",
        )
    )
    assert exc is None
    assert [type(e) for e in events] == [ListenAck, WorkingTask, CompletedTask, ListenEnded]
    assert isinstance(events[0], ListenAck) and events[0].task_ids == [TASK_ID]
    assert isinstance(events[-1], ListenEnded) and events[-1].subscription_id == SUB


async def test_an_abrupt_close_after_the_ack_is_stream_dropped(transport: Callable[[], Any]) -> None:
    events, exc = await listen(sse_script(ack(), end="abort"), transport=transport())
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, StreamDropped)
    assert "listen stream: the connection broke" in str(exc)


async def test_a_clean_close_after_the_ack_without_final_response_is_stream_dropped() -> None:
    events, exc = await listen(sse_script(ack()))
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, StreamDropped)
    assert "closed without a final response" in str(exc)


async def test_a_listen_stream_cut_mid_frame_says_so() -> None:
    events, exc = await listen(sse_script(ack(), b'data: {"jsonrpc":"2.0","method":"notif'))
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, StreamDropped)
    assert "closed mid-event" in str(exc)


@pytest.mark.parametrize(
    ("frame", "named"),
    [
        pytest.param(b"data: not json\n\n", "listen frame is not a JSON object", id="not-json"),
        pytest.param(
            sse_event(ack(task_ids=[1, 2])), "taskIds is not an array of strings", id="ack-ids-numbers"
        ),
        pytest.param(
            sse_event(ack(task_ids="all")), "taskIds is not an array of strings", id="ack-ids-string"
        ),
        pytest.param(
            sse_event(notification("notifications/subscriptions/acknowledged", {"notifications": "all"})),
            "ack.notifications is a string",
            id="ack-notifications-string",
        ),
        pytest.param(b"data: \xc3\x28\n\n", "UTF-8", id="bad-utf8"),
    ],
)
async def test_a_malformed_listen_frame_is_named(frame: bytes, named: str) -> None:
    events, exc = await listen(sse_script(frame, end="hang"))
    assert events == []
    assert isinstance(exc, InvalidResponse)
    assert named in str(exc)


async def test_a_final_error_response_ends_listen_with_a_protocol_error() -> None:
    final = {"jsonrpc": "2.0", "id": SUB, "error": {"code": -32603, "message": "shutting down"}}
    events, exc = await listen(sse_script(ack(), final, end="hang"))
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, ProtocolError)
    assert exc.code == -32603


async def test_unknown_frames_on_a_listen_stream_are_skipped() -> None:
    events, exc = await listen(
        sse_script(
            ack(),
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
            {"jsonrpc": "2.0", "method": "notifications/tasks", "params": "not an object"},
            {"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list", "params": {}},
            {"jsonrpc": "2.0", "id": 99, "result": {}},
            listen_end(),
        )
    )
    assert exc is None
    assert [type(e) for e in events] == [ListenAck, ListenEnded]


async def test_an_oversized_listen_frame_is_an_invalid_response() -> None:
    events, exc = await listen(
        sse_script(ack(), pushed(statusMessage="q" * 2 * CAP), end="hang"), max_body_bytes=CAP
    )
    assert [type(e) for e in events] == [ListenAck]
    assert isinstance(exc, InvalidResponse)
    assert f"SSE event exceeds {CAP}" in str(exc)


async def test_a_100kb_status_message_on_a_listen_frame_is_kept() -> None:
    text = "m" * 100_000
    events, exc = await listen(sse_script(ack(), pushed(statusMessage=text), listen_end()))
    assert exc is None
    assert isinstance(events[1], WorkingTask) and events[1].status_message == text


# --- the request the hostile server saw ----------------------------------------------------------


async def test_the_fake_server_echoes_the_id_it_was_sent() -> None:
    """Guards the harness itself: the script sees the real request, so id-echo cases mean what they say."""

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return json_reply(response(message, task()))

    async with (
        asyncio.timeout(HANG_GUARD),
        HostileServer(script) as server,
        McpClient(server.url, timeouts=FAST) as client,
    ):
        got = await client.get_task(TASK_ID)
    assert got.task_id == TASK_ID
    assert [m["method"] for m in server.messages] == ["server/discover", "tasks/get"]
    asked = server.messages[1]
    assert asked["params"]["taskId"] == TASK_ID
    assert server.headers[1]["Mcp-Method"] == "tasks/get"
    assert server.headers[1]["Mcp-Name"] == TASK_ID


async def test_a_tool_result_over_sse_after_a_server_request() -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return await sse_reply(
            request,
            [
                sse_event({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {}}),
                sse_event(response(message, {"content": [{"type": "text", "text": "ok"}]})),
            ],
        )

    outcome = await call_tool(script)
    assert isinstance(outcome, ToolResult)
    assert outcome.content == [{"type": "text", "text": "ok"}]
