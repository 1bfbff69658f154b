"""The OAuth-protected reference server (tests/oauth/peer.py) and a browser stand-in that consents."""

import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.models import McpServer
from tests.oauth.peer import READY
from tests.peers.launch import RunningPeer, running

MACHINE, SECRET = "reporting-bot", "bot-secret-7f3a9c2e"


@pytest.fixture(scope="module")
def protected() -> Iterator[RunningPeer]:
    """Module-scoped: tests that change the authorization server's behaviour set it back."""
    argv = [
        sys.executable,
        "-m",
        "tests.oauth.peer",
        "--step-up-tool",
        "greet",
        "--client",
        f"{MACHINE}:{SECRET}",
    ]
    with running("oauth-peer", argv, READY) as peer:
        yield peer


def control(peer: RunningPeer, **change: Any) -> dict[str, Any]:
    """The authorization server's counters, after applying `change` (refuse_refresh, token_seconds)."""
    if change:
        return dict(httpx.post(f"{peer.base}/_control", json=change, timeout=5).json())
    return dict(httpx.get(f"{peer.base}/_control", timeout=5).json())


def approve(authorization_url: str) -> str:
    """What a person's browser does: open the consent page, click Approve; the callback URL."""
    page = httpx.get(authorization_url, timeout=5)
    assert page.status_code == 200, page.text
    query = httpx.URL(authorization_url).query.decode()
    answer = httpx.post(authorization_url.split("?")[0], data={"query": query, "user": "alice"}, timeout=5)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


async def approve_async(authorization_url: str) -> str:
    async with httpx.AsyncClient(timeout=5) as http:
        query = httpx.URL(authorization_url).query.decode()
        assert (await http.get(authorization_url)).status_code == 200
        answer = await http.post(authorization_url.split("?")[0], data={"query": query, "user": "alice"})
        return answer.headers["location"]


@pytest.fixture
def admin() -> tuple[Client, User]:
    user = User.objects.create_user("ada", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="admin"))
    client = Client()
    client.force_login(user)
    return client, user


def add_protected(protected: RunningPeer, user: User) -> McpServer:
    return services.server_create(name="guarded", url=protected.url, headers={}, user=user)


def connect(client: Client, server: McpServer, *, tamper: str = "") -> Any:
    """Connect, consent at the authorization server, come back to /oauth/callback."""
    started = client.post(reverse("tasks:oauth-connect", args=[server.pk]))
    assert started.status_code == 302, started.content
    authorization = started["Location"]
    assert authorization.startswith(server.url.rsplit("/mcp", 1)[0] + "/as/authorize?")
    back = httpx.URL(approve(authorization))
    query = back.query.decode() + tamper
    return client.get(f"{back.path}?{query}")
