"""The task-aware MCP gateway: agents call a registered server's tools through the dashboard.

`/gateway/<server id>/mcp` speaks Streamable HTTP at 2026-07-28 to agents holding a token
(tasksapp.models.Agent). Their tasks land in the mirror, attributed to them; tasks/get is answered
from the mirror; people answer what the server's policy gives them (docs/gateway.md).

Modules: app (the ASGI entry and its checks), auth (tokens, scope, rate limit), hosts (DNS
rebinding), envelope (JSON-RPC and header checks), forward (relaying to the upstream), upstream
(its clients), tasks (tasks/* from the mirror), mirror (an agent's view of a task), cache (callers
and fresh tasks kept between requests), http (ASGI).
This package imports services, models and mcpclient; nothing below it imports it.
"""
