"""Agents: the programs that call tools through the gateway, each with a bearer token of its own.

A token is made here, returned once to whoever created or renewed the agent, and kept only as
its SHA-256 (`token_digest`); the gateway finds an agent by that digest.
"""

import hashlib
import secrets
from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from tasksapp.models import GATEWAY_POLICIES, Agent, McpServer
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed, ServiceError

TOKEN_PREFIX = "mcpgw_"  # noqa: S105 (a prefix that says what a token is for)
HINT_CHARS = 10


def token_digest(token: str) -> str:
    """What the database keeps of a token (and looks it up by)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def agent_create(
    *,
    name: str,
    servers: Iterable[McpServer],
    user: Any,
    description: str = "",
    rate_limit: int | None = None,
) -> tuple[Agent, str]:
    """A new agent allowed to use `servers`; returns it with its token (shown once, never stored)."""
    token = _new_token()
    agent = Agent(name=name, description=description, token_hash=token_digest(token))
    agent.token_hint = token[:HINT_CHARS]
    if rate_limit is not None:
        agent.rate_limit_per_minute = rate_limit
    agent.created_by = user if getattr(user, "is_authenticated", False) else None
    try:
        with transaction.atomic():
            agent.save()
            agent.servers.set(list(servers))
            audit(user, "agent_add", detail={"agent": name, "servers": _names(agent)})
    except IntegrityError:
        raise ServiceError(_("An agent named %(name)s exists already.") % {"name": name}) from None
    return agent, token


def agent_update(
    *, agent: Agent, servers: Iterable[McpServer], user: Any, description: str, rate_limit: int
) -> Agent:
    """Change which servers an agent may use, its description and its rate limit."""
    with transaction.atomic():
        before = _names(agent)
        agent.description, agent.rate_limit_per_minute = description, rate_limit
        agent.save(update_fields=["description", "rate_limit_per_minute"])
        agent.servers.set(list(servers))
        audit(user, "agent_edit", detail={"agent": agent.name, "servers": _names(agent), "before": before})
    return agent


def agent_revoke(*, agent: Agent, user: Any) -> Agent:
    """The agent's token stops working at once (its next request gets HTTP 401); its tasks stay."""
    with transaction.atomic():
        revoked = Agent.objects.filter(pk=agent.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        if not revoked:
            raise NotAllowed(_("Agent %(name)s was already revoked.") % {"name": agent.name})
        audit(user, "agent_revoke", detail={"agent": agent.name})
    agent.refresh_from_db()
    return agent


def gateway_policy_set(*, server: McpServer, policy: str, tools: dict[str, str], user: Any) -> McpServer:
    """Who answers the input requests of this server's gateway tasks, with per-tool exceptions."""
    wrong = [value for value in (policy, *tools.values()) if value not in GATEWAY_POLICIES]
    if wrong:
        raise ServiceError(_("%(value)s is not a policy: use either, people or agent.") % {"value": wrong[0]})
    with transaction.atomic():
        before = {"policy": server.gateway_policy, "tools": server.gateway_tool_policies}
        server.gateway_policy, server.gateway_tool_policies = policy, dict(tools)
        server.save(update_fields=["gateway_policy", "gateway_tool_policies"])
        audit(
            user, "gateway_policy", server=server, detail={"policy": policy, "tools": tools, "before": before}
        )
    return server


def _names(agent: Agent) -> list[str]:
    return sorted(agent.servers.values_list("name", flat=True))
