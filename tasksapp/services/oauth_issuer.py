"""An MCP server that names another authorization server than the one its credentials are bound
to: marked (nothing is sent to the new one), audited, and told to the admins; and an admin
confirming the new one.

Confirming drops what belongs to the old authorization server — the registration, the tokens, a
pending Connect — and, unless the admin says the same client is registered at the new one, the
pre-registered client ID, secret and private key too.
"""

import hashlib
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp import events
from tasksapp.mcpclient.oauth import IssuerChanged
from tasksapp.mcpclient.outbound import shown
from tasksapp.models import McpServer, ServerAuthorization
from tasksapp.notify.security import notify_admins
from tasksapp.services.audit import audit
from tasksapp.services.errors import NotAllowed

State = ServerAuthorization.State
CHANGED_SUBJECT = gettext_lazy("%(server)s: its authorization server changed; an admin must confirm")
CHANGED_TEXT = gettext_lazy(
    "%(server)s names %(new)s as its authorization server, not %(old)s. Nothing was sent to it. "
    "Confirm it on the server's page if that is expected."
)


def issuer_changed(*, server_id: int, exc: IssuerChanged) -> None:
    """Mark the server (once per new authorization server), audit it and notify the admins."""
    with transaction.atomic():
        auth, _created = ServerAuthorization.objects.select_for_update().get_or_create(server_id=server_id)
        if auth.state == State.ISSUER_CHANGED and auth.pending_issuer == exc.named:
            return
        if auth.issuer and auth.issuer != exc.bound:
            return  # a client built before the binding changed (an admin confirmed meanwhile)
        auth.state, auth.note, auth.pending_issuer = State.ISSUER_CHANGED, str(exc)[:2000], exc.named[:2000]
        auth.save()
        server = auth.server
        audit(None, "oauth_issuer", server=server, ok=False, detail={"from": exc.bound, "to": exc.named})
        digest = hashlib.sha256(exc.named.encode()).hexdigest()[:16]
        notify_admins(
            key=f"issuer-{server_id}-{digest}",
            subject=CHANGED_SUBJECT,
            text=CHANGED_TEXT,
            values={"server": server.name, "new": shown(exc.named), "old": shown(exc.bound)},
            path=reverse("tasks:server-tools", args=[server_id]),
        )
    events.publish_server_changed(server_id)


def oauth_confirm_issuer(*, server: McpServer, user: Any, issuer: str, keep_client: bool) -> None:
    """Bind the server's OAuth to `issuer`, the authorization server it names now (the one shown
    to the admin: if it changed again meanwhile, nothing is done). Audited."""
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().filter(server=server).first()
        if auth is None or auth.state != State.ISSUER_CHANGED or auth.pending_issuer != issuer:
            raise NotAllowed(
                _("The authorization server to confirm has changed since the page was shown: look again.")
            )
        old = auth.issuer
        stored = {k: v for k, v in auth.secrets.items() if k not in ("grant", "pending")}
        if not keep_client:
            stored.pop("client_secret", None)
            stored.pop("private_key", None)
            auth.client_id = ""
        auth.secrets, auth.issuer, auth.pending_issuer = stored, issuer, ""
        auth.state, auth.note = State.NEEDED, _next_step(auth, issuer)
        auth.pending_state_hash, auth.scope, auth.wanted_scope = "", "", ""
        auth.granted_at = auth.granted_by = auth.expires_at = auth.refreshed_at = None
        auth.save()
        detail = {"from": old, "to": issuer, "client": "kept" if keep_client else "removed"}
        audit(user, "oauth_confirm", server=server, detail=detail)
    events.publish_server_changed(server.pk)


def _next_step(auth: ServerAuthorization, issuer: str) -> str:
    """What the server page says to do now."""
    values = {"issuer": shown(issuer)}
    if auth.grant_type != ServerAuthorization.GrantType.CLIENT_CREDENTIALS:
        return _("Confirmed %(issuer)s: connect again to authorize there.") % values
    if auth.client_id:
        return _("Confirmed %(issuer)s: the next request fetches a token there.") % values
    return (
        _(
            "Confirmed %(issuer)s: enter the client ID and secret (or key) registered there in the OAuth "
            "client settings."
        )
        % values
    )
