"""A hostile MCP server against the dashboard's OAuth client (docs/security.md, round two).

The MCP server is the OAuth-protected reference server (tests/oauth/peer.py), turned hostile
through its control endpoint: it names another authorization server (tests/oauth/hostile.py, a
complete one that records every byte it receives), or internal URLs (a raw honeypot,
tests/support/rawserver.py; a loopback HTTP service with something to hide). Each test asserts what the
attacker got: nothing."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.mcpclient.oauth import IssuerChanged
from tasksapp.models import (
    McpServer,
    NotificationOutbox,
    NotificationPreference,
    OperatorAction,
    RemoteTask,
    ServerAuthorization,
)
from tasksapp.services.oauth import grant_of
from tests.oauth.conftest import MACHINE, SECRET, add_protected, connect, control
from tests.oauth.hostile import HostileIssuer, hostile_issuer
from tests.peers.launch import RunningPeer, free_port
from tests.support.engine_helpers import run_worker_until
from tests.support.rawserver import dripper, honeypot

pytestmark = pytest.mark.django_db(transaction=True)
INTERNAL = "INTERNAL-SECRET-resource-7781"


@pytest.fixture(autouse=True)
def _honest_again(protected: RunningPeer) -> Iterator[None]:
    yield
    control(protected, reset=True, refuse_refresh=False, token_seconds=3600)


@pytest.fixture
def hostile() -> Iterator[HostileIssuer]:
    with hostile_issuer() as issuer:
        yield issuer


@pytest.fixture
def told(admin: tuple[Client, User]) -> User:
    """The admin has browser notifications on: security notices land in their outbox."""
    NotificationPreference.objects.create(user=admin[1], browser=True)
    return admin[1]


def save_client(client: Client, server: McpServer, **fields: str) -> Any:
    form = {"grant_type": "client_credentials", "client_id": "", "client_secret": "", "private_key": ""}
    return client.post(reverse("tasks:oauth-settings", args=[server.pk]), {**form, **fields})


def switch(protected: RunningPeer, issuer: str) -> None:
    """The MCP server names another authorization server, and refuses the tokens it accepted."""
    control(protected, authorization_servers=[issuer], revoke=True)


def page(client: Client, server: McpServer) -> str:
    return str(client.get(reverse("tasks:server-tools", args=[server.pk])).content.decode())


def marked(server: McpServer) -> bool:
    return ServerAuthorization.objects.get(server=server).state == "issuer_changed"


def assert_marked(server: McpServer, protected: RunningPeer, hostile: HostileIssuer) -> None:
    auth = ServerAuthorization.objects.get(server=server)
    assert auth.state == "issuer_changed", (auth.state, auth.note)
    assert auth.issuer == f"{protected.base}/as" and auth.pending_issuer == hostile.issuer
    assert auth.note == (
        f"The authorization server changed from {protected.base}/as to {hostile.issuer}: "
        "an admin must confirm it."
    )
    changed = OperatorAction.objects.filter(server=server, action="oauth_issuer")
    assert [entry.detail for entry in changed] == [{"from": f"{protected.base}/as", "to": hostile.issuer}]


def test_client_credentials_never_go_to_a_switched_authorization_server(
    protected: RunningPeer, admin: tuple[Client, User], hostile: HostileIssuer, told: User
) -> None:
    """The worker holds a client secret for the server's authorization server; the server switches
    to another and refuses the token. The worker used to send client_id:secret there within a
    second, unattended."""
    client, user = admin
    server = add_protected(protected, user)
    assert save_client(client, server, client_id=MACHINE, client_secret=SECRET).status_code == 302
    services.server_refresh(server=server, user=user)
    started = services.call_start(
        server=server, tool="slow_count", arguments={"n": 50, "delay": 0.2}, user=user
    )
    assert started.task is not None
    switch(protected, hostile.issuer)
    run_worker_until(lambda: marked(server) or bool(hostile.seen), timeout=30, listen=False)
    assert SECRET.encode() not in hostile.everything and hostile.seen == []
    assert_marked(server, protected, hostile)
    settings_page = client.get(reverse("tasks:oauth-settings", args=[server.pk])).content.decode()
    assert f"{protected.base}/as" in settings_page  # the admin sees where the secret may go
    text = page(client, server)
    assert "The authorization server changed from" in text and 'id="oauth-confirm-issuer"' in text
    notices = NotificationOutbox.objects.filter(user=told, event="security")
    assert notices.count() == 1 and hostile.issuer in notices.get().text
    kept = RemoteTask.objects.get(pk=started.task.pk)
    assert not kept.expired  # the task waits for an admin, it is not lost


def test_a_private_key_is_never_used_at_a_switched_authorization_server(
    protected: RunningPeer, admin: tuple[Client, User], hostile: HostileIssuer
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    assert save_client(client, server, client_id=MACHINE, private_key=pem).status_code == 302
    switch(protected, hostile.issuer)
    refused = ""
    try:
        services.server_refresh(server=server, user=user)  # an admin's "Discover again"
    except services.ServiceError as exc:
        refused = str(exc)
    assert hostile.seen == []
    assert refused.startswith("The authorization server changed")
    assert_marked(server, protected, hostile)


@pytest.mark.parametrize("registered", ["dynamic", "preregistered"])
def test_connect_never_goes_to_a_switched_authorization_server(
    protected: RunningPeer, admin: tuple[Client, User], hostile: HostileIssuer, registered: str
) -> None:
    """An admin presses Connect after the switch: it used to register, send the browser and then
    the code exchange to the new authorization server."""
    client, user = admin
    server = add_protected(protected, user)
    if registered == "dynamic":
        connect(client, server)
        assert grant_of(ServerAuthorization.objects.get(server=server)).registration is not None
    else:
        fields = {
            "grant_type": "authorization_code",
            "client_id": "pre-client",
            "client_secret": "pre-secret",
        }
        assert save_client(client, server, **fields).status_code == 302
    switch(protected, hostile.issuer)
    answer = client.post(reverse("tasks:oauth-connect", args=[server.pk]), follow=True)
    assert hostile.seen == [] and b"pre-secret" not in hostile.everything
    assert "Cannot start authorization: The authorization server changed" in answer.content.decode()
    assert_marked(server, protected, hostile)
    assert 'id="oauth-connect"' not in page(client, server)  # confirm first


def test_an_admin_confirms_the_new_authorization_server(
    protected: RunningPeer, admin: tuple[Client, User], hostile: HostileIssuer
) -> None:
    client, user = admin
    server = add_protected(protected, user)
    save_client(client, server, client_id=MACHINE, client_secret=SECRET)
    services.server_refresh(server=server, user=user)
    switch(protected, hostile.issuer)
    with pytest.raises(services.ServiceError):
        services.server_refresh(server=server, user=user)
    confirm = reverse("tasks:oauth-confirm-issuer", args=[server.pk])
    viewer = User.objects.create_user("vic")
    viewer.groups.add(Group.objects.get(name="viewer"))
    other = Client()
    other.force_login(viewer)
    assert other.post(confirm, {"issuer": hostile.issuer}).status_code == 403
    stale = client.post(confirm, {"issuer": "https://elsewhere.example.com"}, follow=True)
    assert "has changed since the page was shown" in stale.content.decode()
    assert ServerAuthorization.objects.get(server=server).state == "issuer_changed"
    assert hostile.seen == []
    client.post(confirm, {"issuer": hostile.issuer})  # keep_client unticked: the secret is dropped
    auth = ServerAuthorization.objects.get(server=server)
    assert (auth.state, auth.issuer, auth.pending_issuer, auth.client_id) == (
        "needed",
        hostile.issuer,
        "",
        "",
    )
    assert "client_secret" not in auth.secrets and grant_of(auth).tokens is None
    # A poll that was already on its way with the old binding reports the change again: ignored.
    services.oauth_mark_needed(server_id=server.pk, exc=IssuerChanged(f"{protected.base}/as", hostile.issuer))
    assert ServerAuthorization.objects.get(server=server).state == "needed"
    confirmed = OperatorAction.objects.get(server=server, action="oauth_confirm")
    assert confirmed.user == user
    assert confirmed.detail == {"from": f"{protected.base}/as", "to": hostile.issuer, "client": "removed"}


def test_discovery_never_fetches_an_internal_url_a_server_names(
    protected: RunningPeer, admin: tuple[Client, User], settings: Any
) -> None:
    """The challenge's resource_metadata, the authorization server it names, and the endpoints in
    that server's metadata all point at an internal service: the web process and the worker used
    to GET and POST them. Only the MCP server's own origin is exempt."""
    settings.OUTBOUND_ALLOWED_HOSTS = []
    client, user = admin
    with honeypot() as pot:
        control(protected, resource_metadata=f"{pot.url}metadata")
        try:
            server = add_protected(protected, user)  # its own well-known metadata is used instead
        finally:
            assert pot.connections == 0
        assert ServerAuthorization.objects.get(server=server).state == "needed"

        control(protected, reset=True, metadata={"registration_endpoint": f"{pot.url}register"})
        refused = client.post(reverse("tasks:oauth-connect", args=[server.pk]), follow=True).content.decode()
        assert pot.connections == 0
        assert "refusing to contact" in refused and "OUTBOUND_ALLOWED_HOSTS does not list" in refused

        control(protected, reset=True, authorization_servers=[f"{pot.url}as"])
        with pytest.raises(services.ServiceError) as failed:
            services.server_refresh(server=server, user=user)
        assert pot.connections == 0 and pot.bytes_received == b""
        assert "publishes no usable metadata" in str(failed.value)


class _Internal(BaseHTTPRequestHandler):
    """An internal HTTP service with something to hide: JSON for one path, 404 for the others."""

    def do_GET(self) -> None:
        found = self.path.endswith("/.well-known/oauth-authorization-server/as")
        body = json.dumps({"issuer": INTERNAL, "resource": INTERNAL}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_failed_fetches_read_the_same_and_quote_nothing(
    protected: RunningPeer, admin: tuple[Client, User], settings: Any
) -> None:
    """Even where an admin allowed loopback: a closed port, a silent one, a non-HTTP service and an
    HTTP service that answers (JSON, or 404) all give the same message, and none quotes what came
    back (it used to quote the internal answer's fields on pages every viewer reads)."""
    settings.OAUTH_DEADLINE_SECONDS = 1
    client, user = admin
    server = add_protected(protected, user)
    internal = HTTPServer(("127.0.0.1", 0), _Internal)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    messages: dict[str, str] = {}
    try:
        with honeypot() as silent, dripper(b"-ERR unknown command 'GET'\r\n", interval=0.001) as redis:
            targets = {
                "closed": f"http://127.0.0.1:{free_port()}/as",
                "silent": f"{silent.url}as",
                "not-http": f"{redis.url}as",
                "http": f"http://127.0.0.1:{internal.server_address[1]}/as",
            }
            for name, target in targets.items():
                control(protected, reset=True, authorization_servers=[target])
                with pytest.raises(services.ServiceError) as failed:
                    services.server_refresh(server=server, user=user)
                messages[name] = str(failed.value).replace(target, "<url>")
    finally:
        internal.shutdown()
    assert len(set(messages.values())) == 1, messages
    assert "publishes no usable metadata" in messages["http"]
    shown = page(client, server) + json.dumps(list(OperatorAction.objects.values_list("detail", flat=True)))
    assert INTERNAL not in shown and "ERR" not in shown
