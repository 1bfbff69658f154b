"""Who may call the gateway, for which server, from where, how often and how much: the answers an
agent (or an attacker) gets, as HTTP status and JSON-RPC error body."""

import socket
import time

import httpx
import pytest
from django.conf import settings

from tasksapp.models import Agent, McpServer
from tasksapp.services.agents import agent_create, agent_revoke, agent_update, token_digest
from tests.gateway.support import asgi_post, error, post, result
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_token_an_unknown_one_or_a_revoked_one_gets_401_with_a_json_rpc_error(
    demo_url: str, bot: tuple[Agent, str]
) -> None:
    agent, token = bot
    for sent in (None, "mcpgw_not-a-token", token.upper()):
        response = post(demo_url, sent, "tools/list")
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert error(response)["code"] == -32010
    assert post(demo_url, token, "tools/list").status_code == 200
    agent_revoke(agent=agent, user=None)  # in another process than the gateway's, as by the CLI
    time.sleep(settings.MCP_GATEWAY_CACHE_MS / 1000 + 0.1)  # the longest a process keeps a caller
    response = post(demo_url, token, "tools/list")
    assert response.status_code == 401
    assert "revoked" in error(response)["message"]


def test_a_scope_taken_away_in_another_process_is_404_once_the_callers_kept_time_is_over(
    demo_url: str, bot: tuple[Agent, str]
) -> None:
    agent, token = bot
    assert post(demo_url, token, "tools/list").status_code == 200  # the caller is now kept
    agent_update(agent=agent, servers=[], user=None, description="", rate_limit=600)
    time.sleep(settings.MCP_GATEWAY_CACHE_MS / 1000 + 0.1)
    assert post(demo_url, token, "tools/list").status_code == 404


def test_a_server_outside_the_agents_scope_is_404_like_one_that_does_not_exist(
    gateway_base: str, demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    other = McpServer.objects.create(name="other", url=demo_server.url, era="modern")
    _, token = agent_create(name="narrow", servers=[other], user=None)
    outside = post(f"{gateway_base}/gateway/{demo_registered.pk}/mcp", token, "tools/list")
    missing = post(f"{gateway_base}/gateway/999999/mcp", token, "tools/list")
    assert outside.status_code == missing.status_code == 404
    assert error(outside) == error(missing)
    assert post(f"{gateway_base}/gateway/{other.pk}/mcp", token, "tools/list").status_code == 200


def test_the_token_is_stored_only_as_its_hash(bot: tuple[Agent, str]) -> None:
    agent, token = bot
    stored = Agent.objects.filter(pk=agent.pk).values().get()
    assert token not in repr(stored)
    assert stored["token_hash"] == token_digest(token)


def test_a_foreign_host_or_origin_is_refused_and_the_dashboards_own_origin_accepted(
    demo_url: str, token: str
) -> None:
    port = httpx.URL(demo_url).port
    assert port is not None
    assert post(demo_url, token, "tools/list", headers={"Host": "evil.example.com"}).status_code == 421
    evil = post(demo_url, token, "tools/list", headers={"Origin": "http://evil.example.com"})
    assert evil.status_code == 403
    other_port = post(demo_url, token, "tools/list", headers={"Origin": f"http://127.0.0.1:{port + 1}"})
    assert other_port.status_code == 403
    own = post(demo_url, token, "tools/list", headers={"Origin": f"http://127.0.0.1:{port}"})
    assert own.status_code == 200


def test_a_body_over_the_cap_gets_413_and_a_burst_past_the_rate_limit_429_with_retry_after(
    demo_url: str, demo_registered: McpServer
) -> None:
    # One a minute, bursts of five: however slow the machine, eight requests overrun it.
    _, token = agent_create(name="hasty", servers=[demo_registered], user=None, rate_limit=1)
    big = post(demo_url, token, "tools/call", {"name": "echo", "arguments": {"text": "x" * 1_100_000}})
    assert big.status_code == 413
    assert error(big)["code"] == -32600
    statuses = [post(demo_url, token, "tools/list").status_code for _ in range(7)]
    assert statuses.count(200) == 4 and 429 in statuses
    limited = post(demo_url, token, "tools/list")
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert error(limited)["data"]["retryAfterSeconds"] >= 1


def test_requests_that_break_the_envelope_rules_get_the_errors_a_server_sends(
    demo_url: str, token: str
) -> None:
    wrong_method = post(demo_url, token, "tools/list", headers={"Mcp-Method": "prompts/list"})
    assert (wrong_method.status_code, error(wrong_method)["code"]) == (400, -32020)
    wrong_name = post(demo_url, token, "tools/call", {"name": "echo"}, headers={"Mcp-Name": "other"})
    assert (wrong_name.status_code, error(wrong_name)["code"]) == (400, -32020)
    no_version = httpx.post(
        demo_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )
    assert (no_version.status_code, error(no_version)["code"]) == (400, -32602)
    not_json = httpx.post(
        demo_url,
        content=b"{",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert (not_json.status_code, error(not_json)["code"]) == (400, -32700)
    no_caps = post(demo_url, token, "tasks/get", {"taskId": "x"}, capabilities={})
    assert (no_caps.status_code, error(no_caps)["code"]) == (400, -32021)
    assert httpx.get(demo_url, headers={"Authorization": f"Bearer {token}"}).status_code == 405
    assert result(post(demo_url, token, "tools/list"))["tools"]


@pytest.mark.parametrize("length", [b"\xb2", b"\xb9\xb2", b"12abc", b"-1", b""])
def test_a_content_length_that_is_not_ascii_digits_is_a_400_with_a_json_rpc_error(
    demo_registered: McpServer, token: str, length: bytes
) -> None:
    from tasksapp.gateway.app import GatewayApp

    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    headers = [
        (b"host", b"127.0.0.1"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", length),
    ]
    status, answer = asgi_post(GatewayApp(), headers, body, f"/gateway/{demo_registered.pk}/mcp")
    assert status == 400, answer
    assert answer["error"]["code"] == -32600 and "Content-Length" in answer["error"]["message"]


def test_daphne_itself_refuses_a_content_length_that_is_not_digits(demo_url: str, token: str) -> None:
    url = httpx.URL(demo_url)
    request = (
        f"POST {url.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    ).encode() + b"Content-Length: \xb2\r\n\r\n{}"
    with socket.create_connection((url.host, url.port), timeout=10) as raw:
        raw.sendall(request)
        status_line = raw.recv(200).split(b"\r\n")[0]
    assert status_line.split()[1] == b"400", status_line
