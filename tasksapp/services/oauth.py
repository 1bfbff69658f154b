"""OAuth for MCP servers (issue 11): connecting through a person's browser, the callback, storing
and refreshing grants, and the states the server page shows.

The protocol lives in tasksapp.mcpclient.oauth; this module keeps its GrantState in the
database (ServerAuthorization.secrets, encrypted) and refreshes under a lock taken by a write,
which holds across processes on PostgreSQL (row lock) and SQLite (database write lock): refresh
tokens rotate, so two processes must never both spend one.
"""

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from tasksapp import crypto, events
from tasksapp.connections import db_step
from tasksapp.mcpclient.oauth import (
    AuthorizationRequired,
    ClientConfig,
    GrantState,
    McpOAuth,
    MemoryGrantStore,
    OAuthClient,
    OAuthError,
    PendingAuthorization,
    start_authorization,
)
from tasksapp.mcpclient.oauth_flow import Tokens
from tasksapp.models import McpServer, ServerAuthorization
from tasksapp.services.common import NotAllowed, ServiceError, audit

log = logging.getLogger(__name__)
PENDING_LIFETIME = timedelta(minutes=10)
CLIENT_NAME = "MCP Tasks Dashboard"
State = ServerAuthorization.State


class AuthorizationFailed(ServiceError):
    """Connecting did not work; the message says why and what to do."""


def oauth_transport() -> Any:
    from tasksapp.mcpclient.transport import AiohttpTransport

    return AiohttpTransport(block_private_addresses=settings.MCP_BLOCK_PRIVATE_ADDRESSES)


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
    )


def worker_oauth(server: McpServer) -> tuple[ClientConfig | None, tuple[object, ...]]:
    """For the worker's server rows: the client settings of a server under OAuth (None when it is
    not), and what of them changes the client (a reconnect, other client credentials)."""
    auth = getattr(server, "authorization", None)
    if auth is None or "authorization" in {name.lower() for name in server.headers}:
        return None, ()
    signature: tuple[object, ...] = (auth.state, auth.granted_at, auth.client_id, auth.grant_type)
    try:
        config = client_config(auth)
    except crypto.SecretUnreadable:
        return None, signature
    # A new secret or key takes effect at once (hashed: the signature is compared, never shown).
    return config, (*signature, hash((config.client_secret, config.private_key)))


def worker_auth(server_id: int, url: str, config: ClientConfig) -> McpOAuth:
    return McpOAuth(OAuthClient(config, transport=oauth_transport), DbGrantStore(server_id), url)


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
    client = OAuthClient(client_config(auth), transport=oauth_transport)
    store = DbGrantStore(server.pk) if auth is not None else MemoryGrantStore()
    return McpOAuth(client, store, server.url)


def grant_of(auth: ServerAuthorization) -> GrantState:
    try:
        return GrantState.from_json(auth.secrets.get("grant"))
    except crypto.SecretUnreadable:
        return GrantState()


def _write_grant(auth: ServerAuthorization, grant: GrantState, *, refreshed: bool = False) -> None:
    auth.secrets = {**auth.secrets, "grant": grant.to_json()}
    tokens = grant.tokens
    if tokens is not None:
        auth.state = State.CONNECTED
        auth.issuer, auth.scope = tokens.issuer, " ".join(tokens.scope)
        auth.expires_at = _when(tokens.expires_at)
        if refreshed:
            auth.refreshed_at = timezone.now()
    elif auth.state == State.CONNECTED:
        auth.state, auth.note = State.LOST, "The authorization server refused to renew the token."


def _when(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, tz=UTC) if timestamp is not None else None


class DbGrantStore:
    """GrantStore over ServerAuthorization. The grant is read once and cached: refresh() re-reads
    it under the lock, so a token another process renewed is picked up, never renewed twice."""

    def __init__(self, server_id: int) -> None:
        self.server_id = server_id
        self._grant: GrantState | None = None

    async def load(self) -> GrantState:
        if self._grant is None:
            self._grant = await db_step(_load_grant)(self.server_id)
        return self._grant

    async def save(self, grant: GrantState) -> None:
        self._grant = grant
        await db_step(_save_grant)(self.server_id, grant)

    async def refresh(self, seen: Tokens, renew: Callable[[GrantState], Awaitable[GrantState]]) -> GrantState:
        self._grant = await db_step(_refresh_locked)(self.server_id, seen, renew)
        return self._grant


def _load_grant(server_id: int) -> GrantState:
    auth = ServerAuthorization.objects.filter(server_id=server_id).first()
    return grant_of(auth) if auth is not None else GrantState()


def _save_grant(server_id: int, grant: GrantState) -> None:
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().filter(server_id=server_id).first()
        if auth is None:
            return
        was = auth.state
        _write_grant(auth, grant)
        auth.save()
    if auth.state != was:
        events.publish_server_changed(server_id)


def _refresh_locked(
    server_id: int, seen: Tokens, renew: Callable[[GrantState], Awaitable[GrantState]]
) -> GrantState:
    with transaction.atomic():
        # A write first: PostgreSQL locks the row, SQLite the database, until this commits.
        ServerAuthorization.objects.filter(server_id=server_id).update(updated_at=F("updated_at"))
        auth = ServerAuthorization.objects.select_for_update().filter(server_id=server_id).first()
        if auth is None:
            return GrantState()
        current = grant_of(auth)
        if current.tokens != seen:
            return current  # renewed (or removed) by someone else meanwhile
        fresh = async_to_sync(renew)(current)
        was = auth.state
        _write_grant(auth, fresh, refreshed=fresh.tokens is not None)
        auth.save()
        if fresh.tokens is None:
            audit(None, "oauth_lost", server=auth.server, ok=False, detail={"reason": "refresh refused"})
    if auth.state != was:
        events.publish_server_changed(server_id)
    return fresh


# --- what the server page shows ------------------------------------------------------------


def oauth_mark_needed(*, server_id: int, exc: AuthorizationRequired) -> None:
    """Record that a person must (re)authorize: the state, the scope to ask for, and why."""
    state = {"insufficient_scope": State.STEP_UP, "refresh_failed": State.LOST}.get(exc.need, State.NEEDED)
    with transaction.atomic():
        auth, _ = ServerAuthorization.objects.select_for_update().get_or_create(server_id=server_id)
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
    """Drop tokens, client secret, private key and registration (a changed URL, or a person's wish)."""
    auth = ServerAuthorization.objects.filter(server=server).first()
    if auth is None:
        return
    auth.secrets, auth.client_id = {}, ""
    auth.state, auth.note = State.NEEDED, reason
    auth.pending_state_hash, auth.scope, auth.issuer = "", "", ""
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
) -> ServerAuthorization:
    """The admin's client settings. A secret or key left None is kept; "" removes it."""
    from tasksapp.mcpclient.oauth_flow import check_private_key

    if private_key:
        try:
            check_private_key(private_key)
        except OAuthError as exc:
            raise NotAllowed(f"The private key cannot be used: {exc}.") from exc
    with transaction.atomic():
        auth, _ = ServerAuthorization.objects.select_for_update().get_or_create(server=server)
        stored = auth.secrets
        if client_secret is not None:
            stored["client_secret"] = client_secret
        if private_key is not None:
            stored["private_key"] = private_key
        if client_id != auth.client_id:
            stored.pop("grant", None)  # another client: its registration and tokens are not ours
        auth.secrets, auth.client_id, auth.grant_type = stored, client_id, grant_type
        auth.save()
        detail = {
            "grant_type": grant_type,
            "client_id": client_id,
            "client_secret": crypto.mask(stored["client_secret"]) if stored.get("client_secret") else "",
            "private_key": "set" if stored.get("private_key") else "",
        }
        audit(user, "oauth_settings", server=server, detail=detail)
    events.publish_server_changed(server.pk)
    return auth


# --- Connect and the callback ---------------------------------------------------------------


def oauth_connect(*, server: McpServer, user: Any, redirect_uri: str, metadata_url: str = "") -> str:
    """Discovery, registration and a new authorization request; returns where to send the browser."""
    auth, _ = ServerAuthorization.objects.get_or_create(server=server)
    config = client_config(auth, redirect_uri=redirect_uri, metadata_url=metadata_url)
    scope = tuple(auth.wanted_scope.split()) if auth.state == State.STEP_UP else ()

    async def begin() -> tuple[PendingAuthorization, GrantState]:
        client = OAuthClient(config, transport=oauth_transport)
        try:
            return await start_authorization(client, server.url, grant_of(auth), scope=scope)
        finally:
            await client.aclose()

    try:
        pending, grant = async_to_sync(begin)()
    except OAuthError as exc:
        audit(user, "oauth_connect", server=server, ok=False, detail={"error": str(exc)})
        raise AuthorizationFailed(f"Cannot start authorization: {exc}.") from exc
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().get(pk=auth.pk)
        auth.secrets = {**auth.secrets, "grant": grant.to_json(), "pending": pending.to_json()}
        auth.pending_state_hash = crypto.fingerprint(pending.state)
        auth.pending_by, auth.pending_at = user, timezone.now()
        auth.save()
        detail = {"issuer": pending.issuer, "scope": " ".join(pending.scope), "client": grant_how(grant)}
        audit(user, "oauth_connect", server=server, detail=detail)
    return pending.url


def grant_how(grant: GrantState) -> str:
    registration = grant.registration
    return f"{registration.how} client {registration.client_id}" if registration else ""


def oauth_callback(*, user: Any, callback_url: str, state: str) -> McpServer:
    """Check the authorization response (state, iss), exchange the code, store the tokens."""
    auth = (
        ServerAuthorization.objects.select_related("server")
        .filter(pending_state_hash__in=crypto.fingerprints(state or "-"), pending_by=user)
        .exclude(pending_state_hash="")
        .first()
    )
    if auth is None or auth.pending_at is None or timezone.now() - auth.pending_at > PENDING_LIFETIME:
        raise AuthorizationFailed(
            "This authorization response matches no Connect you started in the last 10 minutes: "
            "use Connect on the server's page again."
        )
    pending = PendingAuthorization.from_json(auth.secrets["pending"])

    async def finish() -> Tokens:
        client = OAuthClient(client_config(auth), transport=oauth_transport)
        try:
            return await client.finish(pending, callback_url)
        finally:
            await client.aclose()

    try:
        tokens = async_to_sync(finish)()
    except OAuthError as exc:
        _clear_pending(auth)
        audit(user, "oauth_grant", server=auth.server, ok=False, detail={"error": str(exc)})
        raise AuthorizationFailed(f"Authorization failed: {exc}.") from exc
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().select_related("server").get(pk=auth.pk)
        grant = replace(
            grant_of(auth), registration=pending.registration, tokens=tokens, requested_scope=pending.scope
        )
        _write_grant(auth, grant)
        auth.granted_by, auth.granted_at, auth.note, auth.wanted_scope = user, timezone.now(), "", ""
        _clear_pending(auth, save=False)
        auth.save()
        detail = {
            "issuer": tokens.issuer,
            "scope": " ".join(tokens.scope),
            "expires_at": str(auth.expires_at),
        }
        audit(user, "oauth_grant", server=auth.server, detail=detail)
    events.publish_server_changed(auth.server_id)
    return auth.server


def _clear_pending(auth: ServerAuthorization, *, save: bool = True) -> None:
    stored = auth.secrets
    stored.pop("pending", None)
    auth.secrets, auth.pending_state_hash, auth.pending_at = stored, "", None
    if save:
        auth.save(update_fields=["secrets_encrypted", "pending_state_hash", "pending_at", "updated_at"])


def client_metadata_document(*, client_id: str, redirect_uri: str) -> str:
    """The Client ID Metadata Document the dashboard serves at its own https URL."""
    return json.dumps(
        {
            "client_id": client_id,
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        }
    )
