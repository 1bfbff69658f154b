"""Connecting an MCP server through a person's browser: discovery and registration (Connect),
the callback (state, iss, the code exchange), and the Client ID Metadata Document we serve.

Both network steps run before their transaction opens; the rows are written after.
"""

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient.oauth import (
    AuthorizationRequired,
    GrantState,
    OAuthError,
    PendingAuthorization,
    start_authorization,
)
from tasksapp.mcpclient.oauth_flow import Tokens
from tasksapp.models import McpServer, ServerAuthorization
from tasksapp.services.audit import audit
from tasksapp.services.errors import ServiceError
from tasksapp.services.oauth import CLIENT_NAME, client_config, oauth_client, oauth_mark_needed
from tasksapp.services.oauth_store import grant_of, write_grant

PENDING_LIFETIME = timedelta(minutes=10)
State = ServerAuthorization.State


class AuthorizationFailed(ServiceError):
    """Connecting did not work; the message says why and what to do."""


def oauth_connect(*, server: McpServer, user: Any, redirect_uri: str, metadata_url: str = "") -> str:
    """Discovery, registration and a new authorization request; returns where to send the browser.

    Only the authorization server everything is bound to is used (the first Connect binds it);
    a server naming another is marked for an admin to confirm, and nothing is sent to it."""
    auth, _ = ServerAuthorization.objects.get_or_create(server=server)
    config = client_config(auth, redirect_uri=redirect_uri, metadata_url=metadata_url)
    scope = tuple(auth.wanted_scope.split()) if auth.state == State.STEP_UP else ()

    async def begin() -> tuple[PendingAuthorization, GrantState]:
        client = oauth_client(server.url, config)
        try:
            return await start_authorization(client, server.url, grant_of(auth), scope=scope)
        finally:
            await client.aclose()

    try:
        pending, grant = async_to_sync(begin)()
    except OAuthError as exc:
        audit(user, "oauth_connect", server=server, ok=False, detail={"error": str(exc)})
        if isinstance(exc, AuthorizationRequired):
            oauth_mark_needed(server_id=server.pk, exc=exc)
        raise AuthorizationFailed(f"Cannot start authorization: {exc}.") from exc
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().get(pk=auth.pk)
        auth.secrets = {**auth.secrets, "grant": grant.to_json(), "pending": pending.to_json()}
        auth.issuer = auth.issuer or pending.issuer  # a person chose it: bound from now on
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
        client = oauth_client(auth.server.url, client_config(auth))
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
    _store_tokens(auth.pk, user, pending, tokens)
    return auth.server


def _store_tokens(pk: int, user: Any, pending: PendingAuthorization, tokens: Tokens) -> None:
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().select_related("server").get(pk=pk)
        grant = replace(
            grant_of(auth), registration=pending.registration, tokens=tokens, requested_scope=pending.scope
        )
        write_grant(auth, grant)
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
