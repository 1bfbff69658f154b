"""Who is calling, and may they: the bearer token names an agent, the agent's scope names servers,
and each agent has a request budget per minute in this process.

No token, an unknown one or a revoked one: HTTP 401. A server outside the agent's scope, or no
such server, or an archived one: HTTP 404, the same answer for all three (nothing to probe).
"""

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from django.db.models import F

from tasksapp.gateway.cache import Callers, settings_generation
from tasksapp.gateway.errors import NOT_FOUND, RATE_LIMITED, UNAUTHORIZED, GatewayError
from tasksapp.gateway.http import Headers, Scope
from tasksapp.lib.connections import db_step
from tasksapp.mcpclient.errors import INVALID_REQUEST
from tasksapp.models import LARGE_SERVER_COLUMNS, Agent, McpServer
from tasksapp.services.agents import TOKEN_PREFIX, token_digest

CHALLENGE = [(b"www-authenticate", b'Bearer realm="mcp-tasks-dashboard gateway"')]


@dataclass(frozen=True)
class Caller:
    """The agent behind a request and the server it asked for (large columns left out)."""

    agent: Agent
    server: McpServer
    digest: str = ""  # of the token it came with: a listen stream asks again whether it still admits


def unauthorized(why: str) -> GatewayError:
    return GatewayError(401, UNAUTHORIZED, f"Unauthorized: {why}", headers=CHALLENGE)


def no_such_server() -> GatewayError:
    return GatewayError(404, NOT_FOUND, "No such MCP server for this agent")


def bearer_token(headers: Headers) -> str:
    values = headers.get_all("authorization")
    if not values:
        raise unauthorized("send 'Authorization: Bearer <agent token>'")
    scheme, _, token = values[0].partition(" ")
    if len(values) > 1 or scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("send 'Authorization: Bearer <agent token>'")
    return token.strip()


# Query parameters that clients and proxies use for credentials.
_CREDENTIAL_PARAMS = frozenset({"access_token", "token", "api_key", "apikey", "key", "auth", "authorization"})


def refuse_token_in_url(scope: Scope) -> None:
    """A credential in the query string is refused (HTTP 400), never used: URLs end up in access
    logs, proxies and browser history, where a bearer token is as good as stolen."""
    query = scope.get("query_string", b"").decode("latin-1")
    if not query:
        return
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() in _CREDENTIAL_PARAMS or TOKEN_PREFIX in value:
            raise GatewayError(
                400,
                INVALID_REQUEST,
                "Never put the agent token in the URL (it is logged there): send it as "
                "'Authorization: Bearer <agent token>', and renew a token that was in a URL",
            )


def _resolve(digest: str, server_id: int) -> Caller | bool | None:
    """The caller, in one query on the way in; for a refusal, a second says which: None for no such
    agent (or revoked), False for a server outside its scope (or none, or archived)."""
    server = (
        McpServer.objects.filter(
            pk=server_id, archived=False, agents__token_hash=digest, agents__revoked_at__isnull=True
        )
        .select_related("authorization")
        .defer(*LARGE_SERVER_COLUMNS)
        .annotate(
            agent_pk=F("agents__pk"),
            agent_name=F("agents__name"),
            agent_rate=F("agents__rate_limit_per_minute"),
        )
        .first()
    )
    if server is not None:
        row: Any = server
        agent = Agent(pk=row.agent_pk, name=row.agent_name, rate_limit_per_minute=row.agent_rate)
        return Caller(agent=agent, server=server, digest=digest)
    if Agent.objects.filter(token_hash=digest, revoked_at__isnull=True).exists():
        return False
    return None


resolve = db_step(_resolve)


class Authenticator:
    """Tokens to callers, a database step only for a caller not seen in the last
    MCP_GATEWAY_CACHE_MS (gateway.cache: a revoked token stops working within that)."""

    def __init__(self) -> None:
        self.callers: Callers[Caller] = Callers()

    async def __call__(self, headers: Headers, server_id: int) -> Caller:
        return await self.resolve(token_digest(bearer_token(headers)), server_id)

    async def still_allowed(self, caller: Caller) -> bool:
        """Whether the caller's token still admits it to its server (an answer at most
        MCP_GATEWAY_CACHE_MS old): a stream opened before a revocation ends soon after it."""
        try:
            await self.resolve(caller.digest, caller.server.pk)
        except GatewayError:
            return False
        return True

    async def resolve(self, digest: str, server_id: int) -> Caller:
        kept = self.callers.get(digest, server_id)
        if kept is not None:
            return kept
        generation = settings_generation()
        found = await resolve(digest, server_id)
        if found is None:
            raise unauthorized("unknown or revoked agent token")
        if found is False:
            raise no_such_server()
        assert isinstance(found, Caller)
        self.callers.put(digest, server_id, found, generation)
        return found


class RateLimiter:
    """A token bucket per agent: `rate_limit_per_minute` a minute, bursts of a tenth of a minute."""

    def __init__(self) -> None:
        self._buckets: dict[int, tuple[float, float]] = {}  # agent id -> (tokens, at)

    def take(self, agent: Agent, now: float | None = None) -> None:
        """Spend one request of the agent's budget; GatewayError 429 with Retry-After when spent."""
        now = time.monotonic() if now is None else now
        rate = agent.rate_limit_per_minute / 60.0
        capacity = max(5.0, agent.rate_limit_per_minute / 10.0)
        tokens, at = self._buckets.get(agent.pk, (capacity, now))
        tokens = min(capacity, tokens + (now - at) * rate)
        if tokens < 1.0:
            self._buckets[agent.pk] = (tokens, now)
            wait = max(1, int((1.0 - tokens) / rate + 0.999))
            raise GatewayError(
                429,
                RATE_LIMITED,
                f"Too many requests: agent {agent.name} may make {agent.rate_limit_per_minute} a minute",
                {"retryAfterSeconds": wait},
                headers=[(b"retry-after", str(wait).encode())],
            )
        self._buckets[agent.pk] = (tokens - 1.0, now)
