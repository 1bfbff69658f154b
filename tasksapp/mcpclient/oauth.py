"""MCP authorization as an httpx.Auth: give McpClient(auth=McpOAuth(...)) and every request to a
protected server carries its bearer token, refreshed before it expires.

On a 401 the server's metadata is looked up again, then the token is refreshed, or the client
credentials grant is run, or, where a person can be asked (`authorize`), the authorization code
flow. On a 403 `insufficient_scope` the wider scope is asked for (step-up), a bounded number of
times and never for a scope already asked for. When nothing can be done without a person,
AuthorizationRequired says why and which scope to ask for.

Credentials, registrations and tokens belong to one authorization server (the issuer the client
is bound to, else the one the stored grant came from). When the server's metadata names another,
nothing at all is sent to it: IssuerChanged, for an admin to confirm.

The grant (registration, tokens) lives in a GrantStore; the dashboard's keeps it encrypted in the
database and refreshes under a short lease, so two processes never spend one refresh token.
"""

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import replace
from typing import Protocol

import httpx

from tasksapp.mcpclient.oauth_flow import (
    AuthorizationRequired,
    ClientConfig,
    GrantState,
    IssuerChanged,
    Need,
    OAuthClient,
    PendingAuthorization,
    RefreshRejected,
    Tokens,
    choose_scope,
)
from tasksapp.mcpclient.oauth_metadata import (
    Challenge,
    OAuthError,
    ResourceMetadata,
    ServerMetadata,
    bearer_challenge,
    discover_resource,
    discover_server,
)
from tasksapp.mcpclient.outbound import OutboundFailed

__all__ = [
    "AuthorizationRequired",
    "ClientConfig",
    "GrantState",
    "GrantStore",
    "IssuerChanged",
    "McpOAuth",
    "MemoryGrantStore",
    "OAuthClient",
    "OAuthError",
    "PendingAuthorization",
    "start_authorization",
]

MAX_AUTHORIZATIONS = 3  # per request: the first one and at most two step-ups
Authorize = Callable[[str], Awaitable[str]]  # authorization URL -> the callback URL it came back to
ConfirmIssuer = Callable[[str, str], Awaitable[bool]]  # (bound issuer, named issuer) -> use the new one?


class GrantStore(Protocol):
    async def load(self) -> GrantState: ...

    async def save(self, grant: GrantState) -> None: ...

    async def refresh(self, seen: Tokens, renew: Callable[[GrantState], Awaitable[GrantState]]) -> GrantState:
        """Under a lock held across processes: if the stored tokens are still `seen`, store and
        return renew(stored); otherwise someone refreshed already, so return what is stored."""
        ...


class MemoryGrantStore:
    """A grant held in memory (the conformance client, tests)."""

    def __init__(self, grant: GrantState | None = None) -> None:
        self.grant = grant or GrantState()
        self._lock = asyncio.Lock()

    async def load(self) -> GrantState:
        return self.grant

    async def save(self, grant: GrantState) -> None:
        self.grant = grant

    async def refresh(self, seen: Tokens, renew: Callable[[GrantState], Awaitable[GrantState]]) -> GrantState:
        async with self._lock:
            if self.grant.tokens != seen:
                return self.grant
            self.grant = await renew(self.grant)
            return self.grant


def bound_issuer(client: OAuthClient, grant: GrantState) -> str | None:
    """The authorization server everything of this client belongs to; None before the first."""
    if client.config.issuer is not None:
        return client.config.issuer
    if grant.registration is not None:
        return grant.registration.issuer
    return grant.tokens.issuer if grant.tokens is not None else None


async def locate(
    client: OAuthClient, server_url: str, challenge: Challenge | None, grant: GrantState
) -> tuple[ResourceMetadata, ServerMetadata]:
    """The server's protected resource metadata and the metadata of the authorization server it
    names: the bound one, else its first. IssuerChanged, before anything is sent to it, when the
    server names others only."""
    resource = await discover_resource(client.http, server_url, challenge)
    bound = bound_issuer(client, grant)
    if bound is not None and bound not in resource.authorization_servers:
        raise IssuerChanged(bound, resource.authorization_servers[0])
    issuer = bound or resource.authorization_servers[0]
    client.check_bound(issuer)
    return resource, await discover_server(client.http, issuer)


async def current_issuer(client: OAuthClient, server_url: str) -> str:
    """The authorization server the MCP server names now (what credentials are bound to when
    saved). Only the MCP server's own challenge and metadata are fetched."""
    challenge = await probe_challenge(client, server_url)
    resource = await discover_resource(client.http, server_url, challenge)
    return resource.authorization_servers[0]


async def start_authorization(
    client: OAuthClient, server_url: str, grant: GrantState, *, scope: tuple[str, ...] = ()
) -> tuple[PendingAuthorization, GrantState]:
    """Discovery, registration and the authorization request for a person's browser (Connect).

    Returns the pending request and the grant with the registration it used (store it: a
    dynamic registration is not repeated)."""
    challenge = await probe_challenge(client, server_url)
    if scope:
        challenge = replace(challenge or Challenge(), scope=scope)
    resource, server = await locate(client, server_url, challenge, grant)
    registration = await client.register(server, grant.registration)
    wanted = choose_scope(
        challenge, resource, server, grant.requested_scope, offline_access=client.config.offline_access
    )
    pending = client.begin(resource, server, registration, wanted)
    return pending, replace(grant, registration=registration)


async def probe_challenge(client: OAuthClient, server_url: str) -> Challenge | None:
    """The Bearer challenge the server answers an unauthenticated request with, if any."""
    try:
        answer = await client.http.request(
            "POST",
            server_url,
            json_body={"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
            read=False,
        )
    except OutboundFailed:
        return None
    return bearer_challenge(answer.headers) if answer.status in (401, 403) else None


class McpOAuth(httpx.Auth):
    """Bearer tokens for one MCP server, obtained and renewed as the spec describes."""

    def __init__(
        self,
        client: OAuthClient,
        store: GrantStore,
        server_url: str,
        *,
        authorize: Authorize | None = None,
        confirm_issuer: ConfirmIssuer | None = None,
    ) -> None:
        """`authorize` is a person's browser (the authorization code flow); `confirm_issuer` an
        admin asked, there and then, whether a new authorization server may be used (the
        conformance harness plays one). Without it, IssuerChanged ends the request."""
        self.client = client
        self.store = store
        self.server_url = server_url
        self.authorize = authorize
        self.confirm_issuer = confirm_issuer
        origin = httpx.URL(server_url)
        self._origin = (origin.scheme, origin.host, origin.port)

    async def aclose(self) -> None:
        await self.client.aclose()

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("McpOAuth is asynchronous only")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if (request.url.scheme, request.url.host, request.url.port) != self._origin:
            raise OAuthError(f"refusing to send {self.server_url}'s token to {request.url.host}")
        tokens = await self._usable_tokens()
        response = yield self._signed(request, tokens)
        authorizations = 0
        while True:
            challenge = bearer_challenge(response.headers)
            if response.status_code == 401 and (challenge is not None or tokens is not None):
                tokens = await self._unauthorized(challenge, tokens, authorizations)
            elif response.status_code == 403 and challenge is not None and challenge.insufficient_scope:
                tokens = await self._step_up(challenge, authorizations)
            else:
                return
            authorizations += 1
            response = yield self._signed(request, tokens)

    def _signed(self, request: httpx.Request, tokens: Tokens | None) -> httpx.Request:
        if tokens is not None:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
        return request

    async def _usable_tokens(self) -> Tokens | None:
        grant = await self.store.load()
        tokens = grant.tokens
        if tokens is None or not tokens.expiring():
            return tokens
        if tokens.refresh_token and grant.registration is not None:
            try:
                return await self._refresh(tokens)
            except RefreshRejected as exc:
                if self.authorize is None and self.client.config.grant == "authorization_code":
                    raise AuthorizationRequired(
                        f"{self.server_url}: the token could not be refreshed ({exc}); reconnect",
                        need="refresh_failed",
                        scope=grant.requested_scope or tokens.scope,
                    ) from exc
                return None
        return tokens  # may still work; a 401 leads to a new authorization

    async def _refresh(self, seen: Tokens) -> Tokens:
        async def renew(current: GrantState) -> GrantState:
            if current.tokens is None or current.registration is None:
                raise RefreshRejected("the grant was removed")
            try:
                fresh = await self.client.refresh(current.tokens, current.registration)
            except RefreshRejected:
                return replace(current, tokens=None)  # spent or revoked: stored as gone
            return replace(current, tokens=fresh)

        grant = await self.store.refresh(seen, renew)
        if grant.tokens is None:
            raise RefreshRejected("the authorization server refused the refresh token")
        return grant.tokens

    async def _unauthorized(self, challenge: Challenge | None, used: Tokens | None, done: int) -> Tokens:
        if done >= MAX_AUTHORIZATIONS:
            raise AuthorizationRequired(
                f"{self.server_url} still refuses the token after {done} authorizations", need="unauthorized"
            )
        grant = await self.store.load()
        resource, server = await self._locate(challenge, grant)
        grant = await self.store.load()
        current = grant.tokens
        if current is not None and current.refresh_token and current.issuer == server.issuer:
            try:
                fresh = await self._refresh(current)
                if fresh != used:
                    return fresh
            except RefreshRejected as exc:
                if self.authorize is None and self.client.config.grant == "authorization_code":
                    raise AuthorizationRequired(
                        f"{self.server_url}: the token could not be refreshed ({exc}); reconnect",
                        need="refresh_failed",
                        scope=current.scope,
                    ) from exc
        need: Need = "unauthorized" if current is None else "refresh_failed"
        return await self._authorize(challenge, resource, server, need=need)

    async def _step_up(self, challenge: Challenge, done: int) -> Tokens:
        grant = await self.store.load()
        asked = set(grant.requested_scope) | set(grant.tokens.scope if grant.tokens else ())
        if set(challenge.scope or ()) <= asked or done >= MAX_AUTHORIZATIONS:
            raise AuthorizationRequired(
                f"{self.server_url} refuses the scope it was granted ({' '.join(challenge.scope or ())}); "
                "the authorization server will not grant more",
                need="insufficient_scope",
                scope=tuple(challenge.scope or ()),
            )
        resource, server = await self._locate(challenge, grant)
        return await self._authorize(challenge, resource, server, need="insufficient_scope")

    async def _locate(
        self, challenge: Challenge | None, grant: GrantState
    ) -> tuple[ResourceMetadata, ServerMetadata]:
        """locate(); a changed issuer that `confirm_issuer` accepts drops everything of the old
        one (registration, tokens, pre-registered credentials) before the new one is used."""
        try:
            return await locate(self.client, self.server_url, challenge, grant)
        except IssuerChanged as exc:
            if self.confirm_issuer is None or not await self.confirm_issuer(exc.bound, exc.named):
                raise
            named = exc.named
        self.client.config = replace(
            self.client.config, issuer=named, client_id=None, client_secret=None, private_key=None
        )
        fresh = GrantState(requested_scope=grant.requested_scope)
        await self.store.save(fresh)
        return await locate(self.client, self.server_url, challenge, fresh)

    async def _authorize(
        self, challenge: Challenge | None, resource: ResourceMetadata, server: ServerMetadata, *, need: Need
    ) -> Tokens:
        grant = await self.store.load()
        config = self.client.config
        scope = choose_scope(
            challenge,
            resource,
            server,
            grant.requested_scope,
            offline_access=config.offline_access and config.grant == "authorization_code",
        )
        if config.grant == "client_credentials":
            registration, tokens = await self.client.client_credentials(resource, server, scope)
            await self.store.save(GrantState(registration, tokens, scope))
            return tokens
        if self.authorize is None:
            raise AuthorizationRequired(
                f"{self.server_url} needs authorization"
                + (f" with scope {' '.join(scope)}" if scope else ""),
                need=need,
                scope=scope,
            )
        registration = await self.client.register(server, grant.registration)
        grant = replace(grant, registration=registration)
        await self.store.save(grant)
        pending = self.client.begin(resource, server, registration, scope)
        tokens = await self.client.finish(pending, await self.authorize(pending.url))
        await self.store.save(GrantState(registration, tokens, scope))
        return tokens
