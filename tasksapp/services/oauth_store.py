"""An MCP server's OAuth grant in the database (ServerAuthorization.secrets, encrypted), and its
refresh across processes.

Refresh tokens rotate, so two processes must never both spend one, and no network I/O may happen
while a transaction or lock is held (a slow authorization server would hold every other writer).
So a refresh is three steps: claim a short lease in a committed write (someone else's live
lease means wait for their result), call the authorization server with no transaction open,
then write the result with a compare-and-set: only if the stored tokens are still the ones that
were refreshed. The lease outlasts the refresh's own deadline, so it cannot lapse mid-call.
"""

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.lib.connections import db_step
from tasksapp.mcpclient.oauth import GrantState, OAuthError
from tasksapp.mcpclient.oauth_flow import Tokens
from tasksapp.models import ServerAuthorization
from tasksapp.services.audit import audit

State = ServerAuthorization.State
LEASE_MARGIN_SECONDS = 10.0
WAIT_STEP_SECONDS = 0.25


def lease_seconds() -> float:
    return float(settings.OAUTH_DEADLINE_SECONDS) + LEASE_MARGIN_SECONDS


def grant_of(auth: ServerAuthorization) -> GrantState:
    try:
        return GrantState.from_json(auth.secrets.get("grant"))
    except crypto.SecretUnreadable:
        return GrantState()


def write_grant(auth: ServerAuthorization, grant: GrantState, *, refreshed: bool = False) -> None:
    """Put `grant` on the row (not saved): the tokens, and the state and figures the page shows."""
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
    it when it claims the lease, so a token another process renewed is picked up, never renewed
    twice."""

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
        owner = secrets.token_hex(16)
        current = await self._claim(seen, owner)
        if current is None:
            return await self.load()  # renewed (or removed) by someone else meanwhile
        try:
            fresh = await renew(current)  # the network: no transaction, no lock
        except BaseException:
            await db_step(_release_lease)(self.server_id, owner)
            raise
        self._grant = await db_step(_finish_refresh)(self.server_id, seen, owner, fresh)
        return self._grant

    async def _claim(self, seen: Tokens, owner: str) -> GrantState | None:
        """The grant to refresh, with the lease ours; None when someone else's result is cached
        now. A live lease of someone else's is waited out (their result, or its expiry)."""
        give_up = time.monotonic() + 2 * lease_seconds()
        while True:
            claim = await db_step(_claim_refresh)(self.server_id, seen, owner)
            if claim.grant is not None:
                if claim.mine:
                    return claim.grant
                self._grant = claim.grant
                return None
            if time.monotonic() > give_up:
                raise OAuthError("another process has been renewing this token for too long", permanent=False)
            await asyncio.sleep(WAIT_STEP_SECONDS)


@dataclass(frozen=True)
class _Claim:
    grant: GrantState | None  # the stored grant (None: busy, try again)
    mine: bool  # the lease is ours: refresh `grant`


def _load_grant(server_id: int) -> GrantState:
    auth = ServerAuthorization.objects.filter(server_id=server_id).first()
    return grant_of(auth) if auth is not None else GrantState()


def _save_grant(server_id: int, grant: GrantState) -> None:
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().filter(server_id=server_id).first()
        if auth is None:
            return
        was = auth.state
        write_grant(auth, grant)
        auth.save()
    if auth.state != was:
        events.publish_server_changed(server_id)


def _claim_refresh(server_id: int, seen: Tokens, owner: str) -> _Claim:
    """One short transaction: the stored grant if its tokens are no longer `seen`; else the lease
    for `owner` if nobody holds a live one (a conditional UPDATE: one claimer wins, on SQLite and
    PostgreSQL alike); else busy."""
    now = timezone.now()
    with transaction.atomic():
        auth = ServerAuthorization.objects.filter(server_id=server_id).first()
        if auth is None:
            return _Claim(GrantState(), mine=False)
        current = grant_of(auth)
        if current.tokens != seen:
            return _Claim(current, mine=False)
        free = Q(refresh_lease_until__isnull=True) | Q(refresh_lease_until__lt=now)
        took = (
            ServerAuthorization.objects.filter(pk=auth.pk)
            .filter(free)
            .update(refresh_lease_owner=owner, refresh_lease_until=now + timedelta(seconds=lease_seconds()))
        )
    return _Claim(current, mine=True) if took else _Claim(None, mine=False)


def _release_lease(server_id: int, owner: str) -> None:
    ServerAuthorization.objects.filter(server_id=server_id, refresh_lease_owner=owner).update(
        refresh_lease_owner="", refresh_lease_until=None
    )


def _finish_refresh(server_id: int, seen: Tokens, owner: str, fresh: GrantState) -> GrantState:
    """The compare-and-set: `fresh` is written only if the stored tokens are still `seen`; else
    what is stored now (a reconnect, a disconnect, a late refresher's) is kept and returned."""
    with transaction.atomic():
        auth = ServerAuthorization.objects.select_for_update().filter(server_id=server_id).first()
        if auth is None:
            return GrantState()
        if auth.refresh_lease_owner == owner:
            auth.refresh_lease_owner, auth.refresh_lease_until = "", None
        current = grant_of(auth)
        if current.tokens != seen:
            auth.save(update_fields=["refresh_lease_owner", "refresh_lease_until"])
            return current
        was = auth.state
        write_grant(auth, fresh, refreshed=fresh.tokens is not None)
        auth.save()
        if fresh.tokens is None:
            audit(None, "oauth_lost", server=auth.server, ok=False, detail={"reason": "refresh refused"})
    if auth.state != was:
        events.publish_server_changed(server_id)
    return fresh
