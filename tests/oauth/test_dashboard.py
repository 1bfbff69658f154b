"""The dashboard's side of OAuth against a real local authorization server: adding a protected
server, Connect and the callback (state, iss), encrypted storage, the worker polling with the
token, refreshing it, losing it (tasks kept) and polling again after a reconnect."""

import asyncio
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.mcpclient.oauth_flow import GrantState, Tokens
from tasksapp.models import McpServer, OperatorAction, RemoteTask, ServerAuthorization
from tasksapp.services.oauth import DbGrantStore, grant_of, oauth_for
from tests.oauth.conftest import add_protected, connect, control
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_adding_a_protected_server_says_what_to_do_next(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    client, _ = admin
    fields = {"name": "guarded", "url": protected.url, "save": "1"}
    page = client.post(reverse("tasks:server-add"), fields, follow=True).content.decode()
    flash = re.search(r'<ul class="messages">(.*?)</ul>', page, re.S)
    assert flash, page[:3000]
    assert "Server guarded added. It needs authorization: use Connect below to sign in." in flash.group(1)
    assert "( ," not in flash.group(1) and "0 tools" not in flash.group(1)


def test_a_protected_server_is_added_and_asks_for_authorization(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    assert server.authorization.state == "needed"
    page = client.get(reverse("tasks:server-tools", args=[server.pk])).content.decode()
    assert "This server needs authorization" in page
    assert 'id="oauth-connect"' in page and ">Connect<" in page


def test_connect_consent_callback_stores_the_grant_encrypted(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    done = connect(client, server)
    assert done.status_code == 302
    auth = ServerAuthorization.objects.get(server=server)
    assert auth.state == "connected" and auth.granted_by == user
    grant = grant_of(auth)
    assert grant.tokens is not None and grant.tokens.refresh_token
    assert grant.tokens.access_token not in auth.secrets_encrypted  # encrypted at rest
    assert grant.tokens.refresh_token not in auth.secrets_encrypted
    server.refresh_from_db()
    assert server.tools, "discovered with the new token"
    page = client.get(reverse("tasks:server-tools", args=[server.pk])).content.decode()
    assert "Authorized" in page and "by ada" in page and "mcp:read" in page
    assert grant.tokens.access_token not in page
    actions = set(OperatorAction.objects.filter(server=server).values_list("action", flat=True))
    assert {"oauth_connect", "oauth_grant"} <= actions
    audit = str(list(OperatorAction.objects.values_list("detail", flat=True)))
    assert grant.tokens.access_token not in audit and grant.tokens.refresh_token not in audit


@pytest.mark.parametrize(
    "tamper",
    ["&state=forged", "&iss=https%3A%2F%2Fevil.example.com"],
    ids=["foreign-state", "other-issuer"],
)
def test_a_callback_with_a_foreign_state_or_issuer_is_refused(
    protected: RunningPeer, admin: tuple[Client, User], tamper: str
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    refused = connect(client, server, tamper=tamper)
    assert refused.status_code == 400
    assert "Authorization failed" in refused.content.decode()
    assert ServerAuthorization.objects.get(server=server).state == "needed"
    assert grant_of(ServerAuthorization.objects.get(server=server)).tokens is None


def test_a_new_url_drops_the_tokens(
    protected: RunningPeer, demo_server: RunningPeer, admin: tuple[Client, User]
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    connect(client, server)
    assert grant_of(ServerAuthorization.objects.get(server=server)).tokens is not None
    services.server_update(server=server, url=demo_server.url, headers=None, enabled=True, user=user)
    auth = ServerAuthorization.objects.get(server=server)
    assert auth.state == "needed" and grant_of(auth) == GrantState() and not auth.secrets


def test_a_refresh_someone_else_made_is_taken_not_repeated(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    """Two processes hold the same tokens; one renews (the refresh token rotates). The other,
    under the lock, finds the stored tokens changed and takes them instead of renewing again."""
    client, user = admin
    server = add_protected(protected, user)
    connect(client, server)
    provider = oauth_for(server)
    assert provider is not None

    async def race() -> tuple[Tokens, GrantState, int]:
        seen = (await DbGrantStore(server.pk).load()).tokens
        assert seen is not None
        first = await provider._refresh(seen)
        attempts = control(protected)["refresh_attempts"]
        late = await DbGrantStore(server.pk).refresh(seen, _never)
        await provider.aclose()
        return first, late, attempts

    first, late, attempts = asyncio.run(race())
    assert late.tokens == first
    assert control(protected)["refresh_attempts"] == attempts


async def _never(current: GrantState) -> GrantState:
    raise AssertionError("a second refresh of the same token was attempted")


def test_the_worker_polls_with_the_token_refreshes_it_and_waits_for_a_reconnect(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    client, user = admin
    control(protected, token_seconds=2)
    try:
        server = add_protected(protected, user)
        connect(client, server)
        started = services.call_start(
            server=server, tool="slow_count", arguments={"n": 8, "delay": 0.5}, user=user
        )
        assert started.task is not None
        task = started.task
        refreshes = control(protected)["refresh_attempts"]
        run_worker_until(
            lambda: RemoteTask.objects.get(pk=task.pk).status == "completed", timeout=30, listen=False
        )
        assert control(protected)["refresh_attempts"] > refreshes, (
            "the token was refreshed while the task ran"
        )
        assert ServerAuthorization.objects.get(server=server).refreshed_at is not None

        # The authorization server stops renewing: the server needs a person, the task is kept.
        second = services.call_start(
            server=server, tool="slow_count", arguments={"n": 6, "delay": 0.5}, user=user
        )
        assert second.task is not None
        second_pk = second.task.pk
        control(protected, refuse_refresh=True)
        run_worker_until(
            lambda: ServerAuthorization.objects.get(server=server).state == "lost", timeout=30, listen=False
        )
        kept = RemoteTask.objects.get(pk=second_pk)
        assert kept.status == "working" and not kept.expired
        for page in (
            reverse("tasks:server-tools", args=[server.pk]),
            reverse("tasks:detail", args=[kept.pk]),
        ):
            assert "Authorization needed" in client.get(page).content.decode()
        assert OperatorAction.objects.filter(server=server, action="oauth_lost").exists()

        control(protected, refuse_refresh=False, token_seconds=3600)
        connect(client, server)  # a person reconnects
        run_worker_until(
            lambda: RemoteTask.objects.get(pk=second_pk).status == "completed", timeout=30, listen=False
        )
    finally:
        control(protected, token_seconds=3600, refuse_refresh=False)


def test_rekey_rewrites_the_oauth_secrets(settings: object, demo_server: RunningPeer) -> None:
    from tasksapp.lib import crypto
    from tasksapp.services.secrets import secrets_rekey

    old, new = "old-key-" + "k" * 50, "new-key-" + "n" * 50
    settings.DASHBOARD_ENCRYPTION_KEY, settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = old, []  # type: ignore[attr-defined]
    crypto.reset()
    try:
        server = McpServer.objects.create(name="s", url=demo_server.url)
        auth = ServerAuthorization(server=server)
        auth.secrets = {"client_secret": "s3cret-value"}
        auth.save()
        settings.DASHBOARD_ENCRYPTION_KEY, settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = new, [old]  # type: ignore[attr-defined]
        crypto.reset()
        assert not crypto.is_current(ServerAuthorization.objects.get(pk=auth.pk).secrets_encrypted)
        assert secrets_rekey().rewritten == 1
        stored = ServerAuthorization.objects.get(pk=auth.pk)
        assert crypto.is_current(stored.secrets_encrypted)
        assert stored.secrets == {"client_secret": "s3cret-value"}
    finally:
        crypto.reset()


def test_a_machine_client_uses_client_credentials_with_its_secret_kept_hidden(
    protected: RunningPeer, admin: tuple[Client, User]
) -> None:
    from tests.oauth.conftest import MACHINE, SECRET

    client, user = admin
    server = add_protected(protected, user)
    settings_url = reverse("tasks:oauth-settings", args=[server.pk])
    form = {
        "grant_type": "client_credentials",
        "client_id": MACHINE,
        "client_secret": SECRET,
        "private_key": "",
    }
    assert client.post(settings_url, form).status_code == 302
    page = client.get(settings_url).content.decode()
    assert SECRET not in page and "/oauth/callback" in page
    services.server_refresh(server=server, user=user)  # a 401, then the client credentials grant
    auth = ServerAuthorization.objects.get(server=server)
    assert auth.state == "connected" and auth.scope == "mcp:read"
    assert SECRET not in auth.secrets_encrypted and grant_of(auth).registration is not None
    server.refresh_from_db()
    assert server.tools
    audit = str(list(OperatorAction.objects.filter(action="oauth_settings").values_list("detail", flat=True)))
    assert MACHINE in audit and SECRET not in audit
