"""Registering servers, discovering what they offer, and recording their health."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from tasksapp import events
from tasksapp.mcpclient import Discovery, McpClient, McpError, Tool
from tasksapp.models import McpServer
from tasksapp.services.common import NotAllowed, RemoteFailed, audit, describe, with_client


@dataclass(frozen=True)
class DiscoveryPreview:
    """What a server offers, found before anything is saved."""

    discovery: Discovery
    tools: list[Tool] = field(default_factory=list)


def server_preview(*, url: str, headers: dict[str, str]) -> DiscoveryPreview:
    """server/discover (or initialize) plus tools/list, without touching the database."""
    probe = McpServer(url=url)
    probe.headers = headers

    async def discover(client: McpClient) -> DiscoveryPreview:
        found = await client.discover()
        return DiscoveryPreview(discovery=found, tools=await client.list_tools())

    try:
        return with_client(probe, discover)
    except ValueError as exc:
        raise NotAllowed(str(exc)) from exc
    except McpError as exc:
        raise RemoteFailed(f"Discovery failed: {describe(exc)}", cause=exc) from exc


def server_create(*, name: str, url: str, headers: dict[str, str], user: Any) -> McpServer:
    """Discover first; save only a server that answered."""
    if McpServer.objects.filter(name=name).exists():
        raise NotAllowed(f"A server named {name!r} already exists.")
    preview = server_preview(url=url, headers=headers)
    with transaction.atomic():
        server = McpServer(name=name, url=url)
        server.headers = headers
        _apply_preview(server, preview)
        server.save()
        audit(user, "server_add", server=server, detail={"url": url, "era": server.era})
        events.publish_server_changed(server.pk)
    return server


def server_update(
    *, server: McpServer, url: str, headers: dict[str, str] | None, enabled: bool, user: Any
) -> McpServer:
    """Change a server; a new URL or new credentials are discovered again before saving."""
    if headers is None:
        headers = server.headers
    if url != server.url or headers != server.headers:
        preview = server_preview(url=url, headers=headers)
        _apply_preview(server, preview)
    with transaction.atomic():
        server.url, server.enabled = url, enabled
        server.headers = headers
        server.save()
        audit(user, "server_edit", server=server, detail={"url": url, "enabled": enabled})
        events.publish_server_changed(server.pk)
    return server


def server_refresh(*, server: McpServer) -> McpServer:
    """Discover again and refresh the tool list (and the era, should the server have been upgraded)."""
    server.era = ""
    preview = server_preview(url=server.url, headers=server.headers)
    _apply_preview(server, preview)
    server.save()
    events.publish_server_changed(server.pk)
    return server


def server_record_success(*, server_id: int, now: datetime) -> None:
    """Clear a failure streak; refresh last_success_at at most every 30 s (this runs per poll)."""
    stale = now - timedelta(seconds=30)
    updated = (
        McpServer.objects.filter(pk=server_id)
        .filter(_failing_or_stale(stale))
        .update(last_success_at=now, consecutive_failures=0, backoff_until=None)
    )
    if updated:
        events.publish_server_changed(server_id)


def server_record_failure(*, server_id: int, error: str, failures: int, backoff_until: datetime) -> None:
    McpServer.objects.filter(pk=server_id).update(
        last_error=error[:2000],
        last_error_at=timezone.now(),
        consecutive_failures=failures,
        backoff_until=backoff_until,
    )
    events.publish_server_changed(server_id)


def server_set_listen_support(*, server_id: int, supported: bool) -> None:
    McpServer.objects.filter(pk=server_id).exclude(listen_supported=supported).update(
        listen_supported=supported
    )


def _failing_or_stale(stale: datetime) -> Q:
    return Q(consecutive_failures__gt=0) | Q(last_success_at__isnull=True) | Q(last_success_at__lt=stale)


def _apply_preview(server: McpServer, preview: DiscoveryPreview) -> None:
    found = preview.discovery
    server.era = found.era
    server.supported_versions = found.supported_versions
    server.capabilities = found.capabilities
    server.tasks_supported = found.tasks_supported
    server.server_info = found.server_info or {}
    server.instructions = (found.instructions or "")[:10000]
    server.tools = [tool.raw for tool in preview.tools]
    server.discovered_at = timezone.now()
    if found.era == "legacy":
        server.listen_supported = False
