"""OAuth for MCP servers: the client every OAuth request goes through, the client settings an
admin saves (bound to one authorization server), and the states the server page shows.

The protocol lives in tasksapp.mcpclient.oauth; the grant and its refresh in
tasksapp/services/oauth_store.py; Connect and the callback in oauth_connect.py; a changed
authorization server in oauth_issuer.py. Network I/O (discovery, token requests) always happens
before a transaction opens, never inside one.
"""

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient.oauth import (
    AuthorizationRequired,
    ClientConfig,
    IssuerChanged,
    McpOAuth,
    MemoryGrantStore,
    OAuthClient,
    OAuthError,
    current_issuer,
)
from tasksapp.mcpclient.outbound import shown
from tasksapp.models import McpServer, ServerAuthorization
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed
from tasksapp.services.oauth_store import DbGrantStore, grant_of
from tasksapp.services.outbound import discovery_policy, oauth_deadlines

__all__ = [
    "DbGrantStore",
    "client_config",
    "grant_of",
    "oauth_client",
    "oauth_configure",
    "oauth_for",
    "oauth_forget",
    "oauth_mark_needed",
    "worker_auth",
    "worker_oauth",
]

log = logging.getLogger(__name__)
CLIENT_NAME = "MCP Tasks Dashboard"
State = ServerAuthorization.State


def oauth_client(server_url: str, config: ClientConfig) -> OAuthClient:
    """The client for one MCP server's OAuth requests: its origin, https and public addresses
    (or OUTBOUND_ALLOWED_HOSTS) only; every exchange under OAUTH_DEADLINE_SECONDS."""
    return OAuthClient(config, policy=discovery_policy(server_url), deadlines=oauth_deadlines())


def client_config(
    auth: ServerAuthorization | None, *, redirect_uri: str = "", metadata_url: str = ""
) -> ClientConfig:
    stored = auth.secrets if auth is not None else {}
    return ClientConfig(
        redirect_uri=redirect_uri or stored.get("redirect_uri", ""),
        client_name=CLIENT_NAME,
        metadata_url=metadata_url or None,
        client_id=(auth.client_id if auth is not None else "") or None,
        client_secret=stored.get("client_secret"),
        private_key=stored.get("private_key"),
        grant=auth.grant_type if auth is not None else "authorization_code",  # type: ignore[arg-type]
        issuer=(auth.issuer if auth is not None else "") or None,
    )


def worker_oauth(server: McpServer) -> tuple[ClientConfig | None, tuple[object, ...]]:
    """For the worker's server rows: the client settings of a server under OAuth (None when it is
    not), and what of them changes the client (a reconnect, other credentials, another issuer)."""
    auth = getattr(server, "authorization", None)
    if auth is None or "authorization" in {name.lower() for name in server.headers}:
        return None, ()
    signature: tuple[object, ...] = (
        auth.state,
        auth.granted_at,
        auth.client_id,
        auth.grant_type,
        auth.issuer,
    )
    try:
        config = client_config(auth)
    except crypto.SecretUnreadable:
        return None, signature
    # A new secret or key takes effect at once (hashed: the signature is compared, never shown).
    return config, (*signature, hash((config.client_secret, config.private_key)))


def worker_auth(server_id: int, url: str, config: ClientConfig) -> McpOAuth:
    return McpOAuth(oauth_client(url, config), DbGrantStore(server_id), url)


def oauth_for(server: McpServer) -> McpOAuth | None:
    """The httpx.Auth for a server's client: its stored grant, or (not yet saved, or never
    authorized) one that only finds out whether the server wants OAuth. None when the admin
    pasted an Authorization header: that one is used as it is."""
    try:
        if any(name.lower() == "authorization" for name in server.headers):
            return None
    except crypto.SecretUnreadable:
        return None
    auth = ServerAuthorization.objects.filter(server_id=server.pk).first() if server.pk else None
    client = oauth_client(server.url, client_config(auth))
    store = DbGrantStore(server.pk) if auth is not None else MemoryGrantStore()
    return McpOAuth(client, store, server.url)


# --- what the server page shows ------------------------------------------------------------


def oauth_mark_needed(*, server_id: int, exc: AuthorizationRequired) -> None:
    """Record that a person must act: the state, the scope to ask for, and why."""
    if isinstance(exc, IssuerChanged):
        from tasksapp.services.oauth_issuer import issuer_changed

        issuer_changed(server_id=server_id, exc=exc)
        return
    state = {"insufficient_scope": State.STEP_UP, "refresh_failed": State.LOST}.get(exc.need, State.NEEDED)
    with transaction.atomic():
        auth, _ = ServerAuthorization.objects.select_for_update().get_or_create(server_id=server_id)
        if auth.state == State.ISSUER_CHANGED:
            return  # an admin must confirm the authorization server first: that is what to say
        if state == State.NEEDED and auth.state in (State.CONNECTED, State.LOST):
            state = State.LOST  # it had a grant: say so, and keep the first reason given
        changed = auth.state != state
        if changed:
            auth.state, auth.note = state, str(exc)[:2000]
            auth.wanted_scope = " ".join(exc.scope)[:2000]
            auth.save()
        if changed and state != State.NEEDED:
            audit(
                None, "oauth_lost", server=auth.server, ok=False, detail={"state": state, "reason": str(exc)}
            )
    if changed:
        events.publish_server_changed(server_id)


def oauth_forget(*, server: McpServer, user: Any = None, reason: str = "") -> None:
    """Drop tokens, client secret, private key, registration and the authorization server they
    were bound to (a changed URL, or a person's wish)."""
    auth = ServerAuthorization.objects.filter(server=server).first()
    if auth is None:
        return
    auth.secrets, auth.client_id = {}, ""
    auth.state, auth.note = State.NEEDED, reason
    auth.pending_state_hash, auth.scope, auth.issuer, auth.pending_issuer = "", "", "", ""
    auth.granted_at = auth.granted_by = auth.expires_at = auth.refreshed_at = None
    auth.save()
    audit(user, "oauth_disconnect", server=server, detail={"reason": reason or "removed by a person"})
    events.publish_server_changed(server.pk)


def oauth_configure(
    *,
    server: McpServer,
    user: Any,
    grant_type: str,
    client_id: str,
    client_secret: str | None,
    private_key: str | None,
    issuer: str = "",
) -> ServerAuthorization:
    """The admin's client settings. A secret or key left None is kept; "" removes it.

    Credentials are bound to one authorization server here, before they are stored: `issuer`
    when given, else the one the MCP server names now (found out first, outside any
    transaction). They are never sent anywhere else. Another client or another issuer drops the
    grant held so far (its registration and tokens belong to the old ones)."""
    _check_private_key(private_key)
    auth = ServerAuthorization.objects.filter(server=server).first()
    stored = auth.secrets if auth is not None else {}
    secret = stored.get("client_secret") if client_secret is None else client_secret
    key = stored.get("private_key") if private_key is None else private_key
    bound = issuer.strip() or None
    if bound is not None:
        _check_issuer(server, bound)
    elif client_id or secret or key:
        bound = _discovered_issuer(server)
    with transaction.atomic():
        auth, _ = ServerAuthorization.objects.select_for_update().get_or_create(server=server)
        _apply_settings(auth, grant_type, client_id, secret, key, bound or auth.issuer)
        auth.save()
        detail = {
            "grant_type": grant_type,
            "client_id": client_id,
            "client_secret": crypto.mask(secret) if secret else "",
            "private_key": "set" if key else "",
            "issuer": auth.issuer,
        }
        audit(user, "oauth_settings", server=server, detail=detail)
    events.publish_server_changed(server.pk)
    return auth


def _apply_settings(
    auth: ServerAuthorization,
    grant_type: str,
    client_id: str,
    secret: str | None,
    key: str | None,
    issuer: str,
) -> None:
    stored = auth.secrets
    stored["client_secret"], stored["private_key"] = secret or "", key or ""
    if client_id != auth.client_id or issuer != auth.issuer:
        # Another client or authorization server: the registration and tokens are not ours.
        stored.pop("grant", None)
        stored.pop("pending", None)
        auth.pending_state_hash = ""
        if auth.state == State.CONNECTED:
            auth.state, auth.note = State.NEEDED, "The OAuth client settings changed: connect again."
    if auth.state == State.ISSUER_CHANGED and issuer == auth.pending_issuer:
        # The admin bound the credentials to the authorization server now named: confirmed.
        auth.state, auth.note, auth.pending_issuer = State.NEEDED, "", ""
    auth.secrets, auth.client_id, auth.grant_type, auth.issuer = stored, client_id, grant_type, issuer


def _check_private_key(private_key: str | None) -> None:
    from tasksapp.mcpclient.oauth_flow import check_private_key

    if private_key:
        try:
            check_private_key(private_key)
        except OAuthError as exc:
            raise NotAllowed(f"The private key cannot be used: {exc}.") from exc


def _check_issuer(server: McpServer, issuer: str) -> None:
    import httpx

    try:
        refusal = discovery_policy(server.url).url_refusal(httpx.URL(issuer))
    except httpx.InvalidURL:
        refusal = "it is not a URL"
    if refusal:
        raise NotAllowed(f"The authorization server {shown(issuer)} cannot be used: {refusal}.")


def _discovered_issuer(server: McpServer) -> str:
    """The authorization server the MCP server names now; nothing but its own challenge and
    metadata is fetched, and no credential is sent."""
    client = oauth_client(server.url, ClientConfig(redirect_uri=""))

    async def find() -> str:
        try:
            return await current_issuer(client, server.url)
        finally:
            await client.aclose()

    try:
        return async_to_sync(find)()
    except OAuthError as exc:
        raise NotAllowed(
            f"Could not find out which authorization server {server.name} uses ({exc}): enter its "
            "issuer, so that the credentials are sent to it and nowhere else."
        ) from exc
