"""The Django-free OAuth client against a real local authorization server (tests/oauth/peer.py)."""

import asyncio

import httpx
import pytest

from tasksapp.mcpclient import McpClient
from tasksapp.mcpclient.addresses import AddressPolicy
from tasksapp.mcpclient.oauth import (
    AuthorizationRequired,
    ClientConfig,
    McpOAuth,
    MemoryGrantStore,
    OAuthClient,
    OAuthError,
)
from tasksapp.mcpclient.oauth_flow import check_callback
from tasksapp.mcpclient.oauth_metadata import bearer_challenge, resource_matches, server_metadata_urls
from tests.oauth.conftest import approve_async, control
from tests.peers.launch import RunningPeer

CONFIG = ClientConfig(redirect_uri="http://127.0.0.1:9/oauth/callback")


def oauth(peer: RunningPeer, store: MemoryGrantStore, *, person: bool = True) -> McpOAuth:
    """The peer's authorization server is on the MCP server's own origin: allowed over http."""
    client = OAuthClient(CONFIG, policy=AddressPolicy().with_own(peer.url, public_only=False))
    return McpOAuth(client, store, peer.url, authorize=approve_async if person else None)


async def test_connects_with_pkce_registers_and_calls(protected: RunningPeer) -> None:
    store = MemoryGrantStore()
    async with McpClient(protected.url, auth=oauth(protected, store)) as client:
        tools = {tool.name for tool in await client.list_tools()}
    assert "slow_count" in tools
    grant = store.grant
    assert grant.registration is not None and grant.registration.how == "dynamic"
    assert grant.tokens is not None and grant.tokens.refresh_token
    assert set(grant.tokens.scope) == {"mcp:read", "offline_access"}  # the challenge's, plus offline
    assert grant.tokens.resource == protected.url


async def test_token_is_refreshed_before_it_expires_and_the_refresh_token_rotates(
    protected: RunningPeer,
) -> None:
    control(protected, token_seconds=2)
    try:
        store = MemoryGrantStore()
        async with McpClient(protected.url, auth=oauth(protected, store)) as client:
            await client.list_tools()
            first = store.grant.tokens
            assert first is not None
            before = control(protected)["refresh_attempts"]
            while not first.expiring():
                await asyncio.sleep(0.1)
            await client.list_tools()
        second = store.grant.tokens
        assert second is not None and second.access_token != first.access_token
        assert second.refresh_token != first.refresh_token
        assert control(protected)["refresh_attempts"] == before + 1
    finally:
        control(protected, token_seconds=3600)


async def test_refused_refresh_needs_a_person(protected: RunningPeer) -> None:
    control(protected, token_seconds=1)
    store = MemoryGrantStore()
    try:
        async with McpClient(protected.url, auth=oauth(protected, store)) as client:
            await client.list_tools()
        control(protected, refuse_refresh=True)
        tokens = store.grant.tokens
        assert tokens is not None
        while not tokens.expiring():
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.1)  # past the token's own expiry: the server refuses it
        async with McpClient(protected.url, auth=oauth(protected, store, person=False)) as client:
            with pytest.raises(AuthorizationRequired) as refused:
                await client.list_tools()
        assert refused.value.need == "refresh_failed"
        assert store.grant.tokens is None  # the spent grant is not kept
    finally:
        control(protected, token_seconds=3600, refuse_refresh=False)


async def test_step_up_asks_for_the_wider_scope_once(protected: RunningPeer) -> None:
    store = MemoryGrantStore()
    async with McpClient(protected.url, auth=oauth(protected, store, person=False)) as client:
        with pytest.raises(AuthorizationRequired) as first:
            await client.list_tools()
    assert first.value.need == "unauthorized"
    async with McpClient(protected.url, auth=oauth(protected, store)) as client:
        await client.list_tools()
        await client.call_tool("greet", {"name": "Ada"})  # 403 insufficient_scope, then step-up
    assert store.grant.tokens is not None
    assert {"mcp:read", "mcp:write"} <= set(store.grant.tokens.scope)
    assert set(store.grant.requested_scope) >= {"mcp:read", "mcp:write"}


async def test_the_token_goes_to_its_server_only(protected: RunningPeer) -> None:
    auth = oauth(protected, MemoryGrantStore())
    elsewhere = httpx.Request("POST", protected.url.replace("127.0.0.1", "localhost"))
    flow = auth.async_auth_flow(elsewhere)
    with pytest.raises(OAuthError, match="refusing to send"):
        await flow.__anext__()
    await auth.aclose()


def test_challenge_parameters_are_read_from_any_position() -> None:
    headers = httpx.Headers(
        [("www-authenticate", 'Basic realm="x", Bearer error="insufficient_scope", scope="a b", '
          'resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp"')]
    )  # fmt: skip
    challenge = bearer_challenge(headers)
    assert challenge is not None and challenge.insufficient_scope
    assert challenge.scope == ("a", "b")
    assert challenge.resource_metadata == "https://rs.example/.well-known/oauth-protected-resource/mcp"
    assert bearer_challenge(httpx.Headers([("www-authenticate", 'Basic realm="x"')])) is None


def test_resource_must_be_the_server_or_a_parent_path() -> None:
    assert resource_matches("https://rs.example/mcp", "https://rs.example/mcp")
    assert resource_matches("https://rs.example", "https://rs.example/mcp")
    assert not resource_matches("https://evil.example/mcp", "https://rs.example/mcp")
    assert not resource_matches("https://rs.example/mc", "https://rs.example/mcp")
    assert not resource_matches("http://rs.example/mcp", "https://rs.example/mcp")


def test_authorization_server_metadata_is_looked_up_in_the_spec_order() -> None:
    assert server_metadata_urls("https://as.example/tenant") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant",
        "https://as.example/.well-known/openid-configuration/tenant",
        "https://as.example/tenant/.well-known/openid-configuration",
    ]


def test_the_callback_is_refused_without_our_state_or_with_another_issuer() -> None:
    from tasksapp.mcpclient.oauth_flow import PendingAuthorization, Registration

    pending = PendingAuthorization(
        url="", state="s1", code_verifier="v", redirect_uri="https://d/cb", issuer="https://as",
        iss_required=True, token_endpoint="https://as/token", resource="https://rs/mcp", scope=(),
        registration=Registration("https://as", "c", "none", "dynamic"),
    )  # fmt: skip
    assert check_callback(pending, "https://d/cb?code=x&state=s1&iss=https%3A%2F%2Fas")["code"] == "x"
    for bad in (
        "code=x&state=s2&iss=https%3A%2F%2Fas",
        "code=x&state=s1&iss=https%3A%2F%2Fas%2F",
        "code=x&state=s1",
    ):
        with pytest.raises(OAuthError):
            check_callback(pending, f"https://d/cb?{bad}")
