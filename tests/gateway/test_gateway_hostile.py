"""Hostile input at the gateway's two edges: what an agent sends, and what an upstream answers."""

import json
from typing import Any

import httpx
import pytest

from tasksapp.models import McpServer
from tasksapp.services.agents import agent_create
from tests.gateway.support import envelope, error, headers_for, post
from tests.support.rawserver import dripper, flood

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_upstream_that_opens_a_stream_and_stalls_ends_the_agents_stream_with_an_error(
    gateway_base: str,
) -> None:
    stall = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: " + b"." * 100_000
    with dripper(stall, interval=0.005) as upstream:
        server = McpServer.objects.create(
            name="staller", url=upstream.url, era="modern", call_timeout_seconds=2, read_timeout_seconds=2
        )
        _, token = agent_create(name="stalled", servers=[server], user=None)
        url = f"{gateway_base}/gateway/{server.pk}/mcp"
        params = {"name": "echo", "arguments": {}, "_meta": envelope()}
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        with httpx.stream(
            "POST", url, json=body, headers=headers_for("tools/call", params, token), timeout=30
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            text = response.read().decode()
    frames = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert len(frames) == 1, text
    answer = json.loads(frames[0])
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32013
    assert "did not answer in time" in answer["error"]["message"]


def test_an_empty_string_id_comes_back_as_the_agent_sent_it(demo_url: str, token: str) -> None:
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": envelope()}
    body = {"jsonrpc": "2.0", "id": "", "method": "tools/call", "params": params}
    answer = httpx.post(demo_url, json=body, headers=headers_for("tools/call", params, token), timeout=30)
    assert answer.status_code == 200
    assert answer.json()["id"] == ""  # a string id, as valid as any other (it went upstream as 0)
    assert "result" in answer.json()


@pytest.mark.parametrize("query", ["access_token={token}", "token={token}", "x={token}", "api_key=abc"])
def test_a_token_in_the_query_string_is_refused_and_never_used(demo_url: str, token: str, query: str) -> None:
    response = post(f"{demo_url}?{query.format(token=token)}", None, "tools/list")
    assert response.status_code == 400
    assert "Never put the agent token in the URL" in error(response)["message"]
    # Even beside a good Authorization header: the URL has leaked it already.
    assert post(f"{demo_url}?{query.format(token=token)}", token, "tools/list").status_code == 400
    assert post(f"{demo_url}?page=2", token, "tools/list").status_code == 200


DEEP = b"[" * 100_000 + b"]" * 100_000
BAD_BODIES = {
    "a batch": b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
    "a string": b'"tools/list"',
    "a boolean id": b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
    "a float id": b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
    "a null id": b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}',
    "an object id": b'{"jsonrpc":"2.0","id":{},"method":"tools/list"}',
    "a numeric method": b'{"jsonrpc":"2.0","id":1,"method":5}',
    "array params": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}',
    "no jsonrpc": b'{"id":1,"method":"tools/list"}',
    "an id of 5,000 digits": b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}',
    "deep nesting": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":'
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}",
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"tools/\xff"}',
}


@pytest.mark.parametrize("shape", list(BAD_BODIES))
def test_bodies_that_are_not_one_json_rpc_request_are_refused_before_any_lookup(
    demo_url: str, token: str, shape: str
) -> None:
    headers = {**headers_for("tools/list", {}, token)}
    response = httpx.post(demo_url, content=BAD_BODIES[shape], headers=headers, timeout=30)
    assert response.status_code == 400
    assert error(response)["code"] in (-32600, -32700)
    assert response.json()["id"] is None


def test_raw_non_ascii_bytes_in_mcp_name_never_match_the_body(demo_url: str, token: str) -> None:
    params = {"name": "café", "arguments": {}, "_meta": envelope()}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers: dict[str, Any] = {**headers_for("tools/call", params, token), "Mcp-Name": "café".encode()}
    response = httpx.post(demo_url, json=body, headers=headers, timeout=30)
    assert (response.status_code, error(response)["code"]) == (400, -32020)


@pytest.mark.parametrize("kind", ["application/json", "text/event-stream"])
def test_an_upstream_answering_past_the_body_cap_is_a_502_and_the_gateway_goes_on(
    gateway_base: str, demo_url: str, token: str, kind: str
) -> None:
    size = 20 * 1024 * 1024  # past MCP_MAX_BODY_BYTES (8 MiB), as the worker's client reads
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {size}\r\n\r\n".encode()
    prefix = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"'
    filler = b"data: " + prefix if kind == "text/event-stream" else prefix
    with flood(head, size, filler=filler + b"a" * 65536) as upstream:
        server = McpServer.objects.create(name=f"flood-{kind[:4]}", url=upstream.url, era="modern")
        _, mine = agent_create(name=f"flooded-{kind[:4]}", servers=[server], user=None)
        url = f"{gateway_base}/gateway/{server.pk}/mcp"
        response = post(url, mine, "tools/call", {"name": "echo", "arguments": {}})
    assert len(response.content) < 1024 * 1024  # nothing of the flood reached the agent
    if kind == "application/json":
        assert response.status_code == 502
        answer = response.json()
    else:  # the stream was open before the cap was passed: it ends with the error for the request
        assert response.status_code == 200
        frames = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert len(frames) == 1, response.text
        answer = json.loads(frames[0])
    assert answer["error"]["code"] == -32013 and "exceeds" in answer["error"]["message"]
    assert post(demo_url, token, "tools/list").status_code == 200
