"""Registering servers and discovering what they offer (their health: tasksapp.services.health).

Every attempt to add, edit or re-discover a server is audited, failed ones included, with what
changed and any credentials masked. Stored credentials never follow a URL to another origin.
"""

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient import Discovery, McpClient, McpError, Tool
from tasksapp.mcpclient.oauth import AuthorizationRequired, IssuerChanged
from tasksapp.models import McpServer
from tasksapp.services import oauth
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed, RemoteFailed, ServiceError, describe, refuse_archived
from tasksapp.services.remote import with_client

NEEDS_AUTHORIZATION = gettext_lazy(
    "This server needs authorization (OAuth). Save it, then use Connect on its page to sign in at its "
    "authorization server."
)
UNREADABLE_HEADERS = gettext_lazy(
    "The stored headers cannot be decrypted (was DASHBOARD_ENCRYPTION_KEY changed? see docs/security.md): "
    "enter them again, or '-' to remove them."
)


@dataclass(frozen=True)
class DiscoveryPreview:
    """What a server offers, found before anything is saved; tools_note says when tools were left out."""

    discovery: Discovery
    tools: list[Tool] = field(default_factory=list)
    tools_note: str = ""


def server_preview(*, url: str, headers: dict[str, str], server: McpServer | None = None) -> DiscoveryPreview:
    """server/discover (or initialize) plus tools/list, without touching the database.

    With `server` (its URL unchanged) its OAuth grant is used; a new URL is probed without one."""
    probe = McpServer(url=url, pk=server.pk if server is not None and server.url == url else None)
    probe.headers = headers
    most, most_bytes = settings.MCP_MAX_TOOLS, settings.MCP_MAX_TOOLS_BYTES

    async def discover(client: McpClient) -> DiscoveryPreview:
        found = await client.discover()
        tools, note = _bounded(await client.list_tools(max_tools=most, max_bytes=most_bytes))
        return DiscoveryPreview(discovery=found, tools=tools, tools_note=note)

    try:
        return with_client(probe, discover)
    except ValueError as exc:
        raise NotAllowed(str(exc)) from exc
    except IssuerChanged as exc:
        raise RemoteFailed(str(exc), cause=exc) from exc
    except AuthorizationRequired as exc:
        raise RemoteFailed(str(NEEDS_AUTHORIZATION), cause=exc) from exc
    except McpError as exc:
        raise RemoteFailed(_("Discovery failed: %(error)s") % {"error": describe(exc)}, cause=exc) from exc


def server_create(
    *,
    name: str,
    url: str,
    headers: dict[str, str],
    user: Any,
    timeouts: tuple[int, int] | None = None,
    enabled: bool = True,
    roots: list[Any] | None = None,
) -> McpServer:
    """Discover first; save only a server that answered.

    `roots` (what roots/list answers) and `enabled` are saved with it; the audit detail names them
    when they differ from the defaults (enabled, no roots)."""
    attempt: dict[str, Any] = {"name": name, "url": url, "headers": _masked(headers)}
    if not enabled:
        attempt["enabled"] = False
    if roots:
        attempt["roots"] = roots
    try:
        if McpServer.objects.filter(name=name).exists():
            raise NotAllowed(_("A server named %(name)r already exists.") % {"name": name})
        preview = _preview_or_authorization(url=url, headers=headers)
    except ServiceError as exc:
        audit(user, "server_add", ok=False, detail={**attempt, "error": str(exc)})
        raise
    with transaction.atomic():
        server = McpServer(name=name, url=url, enabled=enabled, roots=roots or [])
        server.headers = headers
        if timeouts is not None:
            server.read_timeout_seconds, server.call_timeout_seconds = timeouts
        if isinstance(preview, DiscoveryPreview):
            _apply_preview(server, preview)
        server.save()
        if isinstance(preview, AuthorizationRequired):
            oauth.oauth_mark_needed(server_id=server.pk, exc=preview)
        audit(user, "server_add", server=server, detail={**attempt, "era": server.era})
        events.publish_server_changed(server.pk)
    return server


def _preview_or_authorization(
    *, url: str, headers: dict[str, str]
) -> DiscoveryPreview | AuthorizationRequired:
    """The preview, or, for a server that answers with an OAuth challenge, what it asks for."""
    try:
        return server_preview(url=url, headers=headers)
    except RemoteFailed as exc:
        if isinstance(exc.cause, AuthorizationRequired):
            return exc.cause
        raise


def same_origin(one: str, other: str) -> bool:
    """Scheme, host and port equal (default ports filled in): where credentials may be sent."""
    a, b = urlsplit(one), urlsplit(other)
    try:
        ports = (a.port or _DEFAULT_PORTS.get(a.scheme)), (b.port or _DEFAULT_PORTS.get(b.scheme))
    except ValueError:
        return False
    return (a.scheme.lower(), (a.hostname or "").lower()) == (
        b.scheme.lower(),
        (b.hostname or "").lower(),
    ) and (ports[0] == ports[1])


_DEFAULT_PORTS = {"http": 80, "https": 443}


def server_update(
    *,
    server: McpServer,
    url: str,
    headers: dict[str, str] | None,
    enabled: bool,
    user: Any,
    name: str | None = None,
    timeouts: tuple[int, int] | None = None,
    roots: list[Any] | None = None,
) -> McpServer:
    """Change a server; a new URL or new credentials are discovered again before saving.

    headers=None keeps the stored headers, except when the URL moves to another origin: they are
    then dropped (never sent to the new host) unless given again. `timeouts` is (read, call) in
    seconds; the worker picks changes up within a second. roots=None keeps the stored roots.
    """
    name = server.name if name is None else name
    before = _described(server)
    try:
        kept = server.headers if headers is None else headers
    except crypto.SecretUnreadable:
        kept = None
    if headers is None and not same_origin(url, server.url):
        kept = {}
    after = {"name": name, "url": url, "enabled": enabled, "headers": _masked(kept or {})}
    detail = _changes(before, after, server, kept)
    if timeouts is not None:
        _timeout_changes(detail, server, timeouts)
    if roots is not None and roots != server.roots:
        _add_changes(detail, [("roots", server.roots, roots)])
    try:
        refuse_archived(server)
        if kept is None:
            raise NotAllowed(str(UNREADABLE_HEADERS))
        if name != server.name and McpServer.objects.filter(name=name).exclude(pk=server.pk).exists():
            raise NotAllowed(_("A server named %(name)r already exists.") % {"name": name})
        found = None
        if url != server.url or "headers" in detail["changes"]:
            found = _preview_or_authorization(url=url, headers=kept)
            if isinstance(found, DiscoveryPreview):
                _apply_preview(server, found)
    except ServiceError as exc:
        server.refresh_from_db()
        audit(user, "server_edit", server=server, ok=False, detail={**detail, "error": str(exc)})
        raise
    with transaction.atomic():
        if url != server.url:  # tokens and client credentials never follow the server elsewhere
            oauth.oauth_forget(server=server, user=user, reason=f"the URL changed from {server.url}")
        if isinstance(found, AuthorizationRequired):
            oauth.oauth_mark_needed(server_id=server.pk, exc=found)
        server.name, server.url, server.enabled = name, url, enabled
        server.headers = kept
        if roots is not None:
            server.roots = roots
        if timeouts is not None:
            server.read_timeout_seconds, server.call_timeout_seconds = timeouts
            detail["timeouts"] = list(timeouts)
        server.save()
        audit(user, "server_edit", server=server, detail=detail)
        events.publish_server_changed(server.pk)
    return server


def server_refresh(*, server: McpServer, user: Any = None) -> McpServer:
    """Discover again and refresh the tool list (and the era, should the server have been upgraded)."""
    try:
        refuse_archived(server)
        try:
            headers = server.headers
        except crypto.SecretUnreadable:
            raise NotAllowed(str(UNREADABLE_HEADERS)) from None
        server.era = ""
        preview = server_preview(url=server.url, headers=headers, server=server)
    except ServiceError as exc:
        server.refresh_from_db()
        if isinstance(exc, RemoteFailed) and isinstance(exc.cause, AuthorizationRequired):
            oauth.oauth_mark_needed(server_id=server.pk, exc=exc.cause)
        audit(user, "server_refresh", server=server, ok=False, detail={"url": server.url, "error": str(exc)})
        raise
    with transaction.atomic():
        _apply_preview(server, preview)
        server.save()
        detail = {"url": server.url, "era": server.era, "tools": len(server.tools)}
        audit(user, "server_refresh", server=server, detail=detail)
        events.publish_server_changed(server.pk)
    return server


def server_archive(*, server: McpServer, user: Any) -> McpServer:
    """Keep a server's tasks and history, read-only: the worker stops polling it and nothing more is
    sent to it (calls, answers, cancels are refused). Open input requests stay as they are, unanswerable."""
    return _set_archived(server, user, archived=True)


def server_unarchive(*, server: McpServer, user: Any) -> McpServer:
    """Bring an archived server back: its unfinished tasks are polled again from the next worker refresh."""
    return _set_archived(server, user, archived=False)


def _set_archived(server: McpServer, user: Any, *, archived: bool) -> McpServer:
    action = "server_archive" if archived else "server_unarchive"
    with transaction.atomic():
        changed = McpServer.objects.filter(pk=server.pk, archived=not archived).update(archived=archived)
        server.refresh_from_db()
        if not changed:
            if archived:
                raise NotAllowed(_("Server %(name)s is already archived.") % {"name": server.name})
            raise NotAllowed(_("Server %(name)s is already not archived.") % {"name": server.name})
        open_tasks = server.tasks.exclude(status__in=("completed", "failed", "cancelled")).count()
        summary = f"archived: {_shown(not archived)} → {_shown(archived)}"
        detail = {"summary": summary, "open_tasks": open_tasks}
        audit(user, action, server=server, detail=detail)
        events.publish_server_changed(server.pk)
    return server


def server_set_listen_support(*, server_id: int, supported: bool) -> None:
    McpServer.objects.filter(pk=server_id).exclude(listen_supported=supported).update(
        listen_supported=supported
    )


def _bounded(tools: list[Tool]) -> tuple[list[Tool], str]:
    """The tools that fit MCP_MAX_TOOLS and MCP_MAX_TOOLS_BYTES, in the server's order, and a note if cut."""
    most, most_bytes = settings.MCP_MAX_TOOLS, settings.MCP_MAX_TOOLS_BYTES
    kept: list[Tool] = []
    size = 0
    for tool in tools:
        size += len(json.dumps(tool.raw, separators=(",", ":")))
        if len(kept) == most or size > most_bytes:
            limits = f"{most} tools and {most_bytes // 1024} KiB of tool descriptions"
            return kept, (
                f"This server lists more tools than the dashboard keeps (at most {limits}; "
                f"MCP_MAX_TOOLS, MCP_MAX_TOOLS_BYTES): only the first {len(kept)} are shown and can be run."
            )
        kept.append(tool)
    return kept, ""


def _apply_preview(server: McpServer, preview: DiscoveryPreview) -> None:
    found = preview.discovery
    server.era = found.era
    server.supported_versions = found.supported_versions
    server.capabilities = found.capabilities
    server.tasks_supported = found.tasks_supported
    server.server_info = found.server_info or {}
    server.instructions = (found.instructions or "")[:10000]
    server.tools = [tool.raw for tool in preview.tools]
    server.tools_note = preview.tools_note
    server.discovered_at = timezone.now()
    # It answered: healthy from registration on, not "unknown" until a task has been polled.
    server.last_success_at = server.discovered_at
    # Discovery re-evaluates push: unknown until the worker tries it (a refusal then sets False).
    server.listen_supported = False if found.era == "legacy" else None


def _masked(headers: dict[str, str]) -> dict[str, str]:
    return {name: crypto.mask(value) for name, value in headers.items()}


def _described(server: McpServer) -> dict[str, Any]:
    try:
        headers = _masked(server.headers)
    except crypto.SecretUnreadable:
        headers = {"(stored headers)": "unreadable"}
    return {"name": server.name, "url": server.url, "enabled": server.enabled, "headers": headers}


def _changes(
    before: dict[str, Any], after: dict[str, Any], server: McpServer, headers: dict[str, str] | None
) -> dict[str, Any]:
    """{"changes": {field: [old, new]}, "summary": "..."}: the audit detail of an edit, secrets masked."""
    changes = {
        key: [before[key], after[key]] for key in ("name", "url", "enabled") if before[key] != after[key]
    }
    try:
        headers_changed = headers is None or headers != server.headers
    except crypto.SecretUnreadable:
        headers_changed = True
    if headers_changed:
        changes["headers"] = [before["headers"], after["headers"]]
    summary = "; ".join(f"{key}: {_shown(old)} → {_shown(new)}" for key, (old, new) in changes.items())
    return {"changes": changes, "summary": summary or "no change"}


def _timeout_changes(detail: dict[str, Any], server: McpServer, timeouts: tuple[int, int]) -> None:
    """Add changed timeouts to an edit's audit detail, the same way as the other fields."""
    read, call = timeouts
    _add_changes(
        detail,
        [
            ("read_timeout_seconds", server.read_timeout_seconds, read),
            ("call_timeout_seconds", server.call_timeout_seconds, call),
        ],
    )


def _add_changes(detail: dict[str, Any], fields: list[tuple[str, Any, Any]]) -> None:
    """Add the changed (field, old, new) to an edit's audit detail and write its summary again."""
    for key, old, new in fields:
        if old != new:
            detail["changes"][key] = [old, new]
    changes = detail["changes"].items()
    detail["summary"] = "; ".join(f"{key}: {_shown(old)} → {_shown(new)}" for key, (old, new) in changes) or (
        "no change"
    )


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
