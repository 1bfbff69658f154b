"""Each server's gateway traffic: calls per tool (or method), errors, p50/p99 latency, by agent, over
the last hour and day, on the server's page and in /metrics."""

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tasksapp.models import Agent, GatewayTraffic, McpServer
from tests.gateway.support import post

pytestmark = pytest.mark.django_db(transaction=True)


def counted() -> int:
    return sum(GatewayTraffic.objects.values_list("calls", flat=True))


def test_calls_errors_and_latency_per_tool_and_agent_reach_the_page_and_metrics(
    demo_url: str, bot: tuple[Agent, str], demo_registered: McpServer
) -> None:
    agent, token = bot
    for _ in range(3):
        post(demo_url, token, "tools/list")
    for text in ("a", "b"):
        post(demo_url, token, "tools/call", {"name": "echo", "arguments": {"text": text}})
    assert post(demo_url, token, "tools/call", {"name": "no_such_tool", "arguments": {}}).status_code >= 400
    deadline = time.monotonic() + 30
    while counted() < 6:  # each Daphne process writes its figures every second here
        assert time.monotonic() < deadline, f"only {counted()} calls written"
        time.sleep(0.2)
    agent.refresh_from_db()
    assert agent.last_used_at is not None
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get(f"/servers/{demo_registered.pk}/tools/").content.decode()
    table = page.split('id="traffic-1"')[1].split("</table>")[0]
    assert '<code>echo</code></td><td class="num">2</td><td class="num">0 %' in table
    assert '<code>no_such_tool</code></td><td class="num">1</td><td class="num">100 %' in table
    assert '<code>tools/list</code></td><td class="num">3</td>' in table
    assert 'agent bot</td><td class="num">6</td><td class="num">17 %' in table
    assert "≤ " in table and " ms" in table
    metrics = client.get("/metrics").content.decode()
    echo = 'agent="bot",method="tools/call",server="demo",tool="echo",window="1h"'
    assert f"mcp_gateway_calls{{{echo}}} 2.0" in metrics
    latency = 'agent="bot",method="tools/call",quantile="0.99",server="demo",tool="echo",window="1h"'
    assert f"mcp_gateway_latency_seconds{{{latency}}}" in metrics
    failing = 'agent="bot",method="tools/call",server="demo",tool="no_such_tool",window="1d"'
    assert f"mcp_gateway_errors{{{failing}}} 1.0" in metrics
