"""Plain-JSON views of the mirror, for the command line and downloads. Values stay as servers sent them."""

from datetime import datetime
from typing import Any

from django.conf import settings

from tasksapp.models import Agent, McpServer, PendingCall, RemoteTask


def task_json(task: RemoteTask, *, events: bool = True) -> dict[str, Any]:
    open_inputs = {
        request.key: {"method": request.method, "params": request.params}
        for request in task.input_requests.filter(state="open")
    }
    data: dict[str, Any] = {
        "id": task.pk,
        "server": task.server.name,
        "tool": task.tool_name,
        "startedBy": task.starter or None,  # the agent's name for a gateway task, else the user's
        "agent": task.agent.name if task.agent else None,
        "taskId": task.remote_id,
        "status": task.status,
        "statusMessage": task.status_message or None,
        "createdAt": task.created_at_raw or None,  # the server's createdAt, as it sent it
        "lastUpdatedAt": task.updated_at_raw or None,
        "mirroredAt": task.created_at.isoformat(),  # when the dashboard first stored the task
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_interval_ms,
        "result": task.result,
        "error": task.error,
        "inputRequests": open_inputs,
        "cancelRequested": task.cancel_requested_at is not None,
        "expired": task.expired,
        "lastChangedAt": _iso(task.last_seen_at),  # the dashboard's clock, as the next two
        "lastConfirmedAt": _iso(task.last_confirmed_at),
        "staleSince": _iso(task.stale_since),  # set while the server is failing or disabled
    }
    if events:
        data["events"] = [
            {
                "status": event.status,
                "statusMessage": event.status_message or None,
                "source": event.source,
                "observedAt": event.observed_at.isoformat(),
                "merged": event.merged,  # messages this event stands for besides its own
                "note": event.note or None,
            }
            for event in task.events.all()
        ]
    return data


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def task_row_json(task: RemoteTask) -> dict[str, Any]:
    return {
        "id": task.pk,
        "server": task.server.name,
        "tool": task.tool_name,
        "status": task.status,
        "display": task.display_status,
        "startedBy": task.starter or None,
        "statusMessage": task.status_message or None,
        "createdAt": task.created_at_raw or None,  # the same field as in task_json
        "mirroredAt": task.created_at.isoformat(),
    }


def server_json(server: McpServer) -> dict[str, Any]:
    return {
        "id": server.pk,
        "name": server.name,
        "url": server.url,
        "headers": server.masked_headers,
        "enabled": server.enabled,
        "era": server.era or None,
        "supportedVersions": server.supported_versions,
        "tasksSupported": server.tasks_supported,
        "listenSupported": server.listen_supported,
        "serverInfo": server.server_info or None,
        "tools": [tool.get("name") for tool in server.tools],
        "health": server.health,
        "lastSuccessAt": server.last_success_at.isoformat() if server.last_success_at else None,
        "lastError": server.last_error or None,
        "consecutiveFailures": server.consecutive_failures,
        "backoffUntil": server.backoff_until.isoformat() if server.backoff_until else None,
        "gatewayUrl": gateway_url(server),
        "gatewayPolicy": server.gateway_policy,
        "failingWorkers": list(server.failing_workers),  # who is behind (the health is the worst view)
        "workersReporting": server.workers_reporting,
    }


def gateway_url(server: McpServer, base: str | None = None) -> str:
    """Where agents reach this server through the gateway (base: the dashboard's URL as reached)."""
    return f"{(base or settings.DASHBOARD_URL).rstrip('/')}/gateway/{server.pk}/mcp"


def agent_json(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.pk,
        "name": agent.name,
        "description": agent.description or None,
        "tokenHint": agent.token_hint,
        "servers": sorted(server.name for server in agent.servers.all()),
        "rateLimitPerMinute": agent.rate_limit_per_minute,
        "createdAt": agent.created_at.isoformat(),
        "revokedAt": _iso(agent.revoked_at),
        "lastUsedAt": _iso(agent.last_used_at),
    }


def pending_json(pending: PendingCall) -> dict[str, Any]:
    return {
        "id": pending.pk,
        "server": pending.server.name,
        "tool": pending.tool_name,
        "state": pending.state,
        "round": pending.rounds,
        "inputRequests": pending.input_requests,
    }
