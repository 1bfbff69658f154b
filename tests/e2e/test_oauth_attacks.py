"""A hostile MCP server in Chromium, as an admin meets it (docs/security.md, round two): the
machine-to-machine credentials are bound to an authorization server when saved and the page says
which; the server switches to another one while the worker polls a task; the page says so, the
other authorization server receives nothing, and the admin confirms it. A webhook URL to an
internal address is refused on the form."""

import re
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import run_tool
from tests.oauth.conftest import MACHINE, SECRET, control
from tests.oauth.hostile import HostileIssuer, hostile_issuer
from tests.oauth.peer import READY
from tests.peers.launch import RunningPeer, running

pytestmark = pytest.mark.browser
NAME = "m2m-switch"


@pytest.fixture(scope="module")
def machine_peer() -> Iterator[RunningPeer]:
    argv = [sys.executable, "-m", "tests.oauth.peer", "--no-listen", "--client", f"{MACHINE}:{SECRET}"]
    with running("oauth-peer-m2m", argv, READY) as peer:
        yield peer


@pytest.fixture
def hostile() -> Iterator[HostileIssuer]:
    with hostile_issuer() as issuer:
        yield issuer


def reload_until(page: Page, selector: str, within: float = 60.0) -> None:
    """The worker notices on its next poll; a hang guard, not a timed assertion."""
    deadline = time.monotonic() + within
    while not page.locator(selector).count():
        assert time.monotonic() < deadline, f"{selector} never appeared"
        time.sleep(0.5)
        page.reload()


def test_a_switched_authorization_server_gets_nothing_until_an_admin_confirms_it(
    logged_in: Callable[..., Page], machine_peer: RunningPeer, hostile: HostileIssuer
) -> None:
    page = logged_in("demo")
    page.goto("/servers/add/")
    page.get_by_label("Name").fill(NAME)
    page.get_by_label("MCP endpoint URL").fill(machine_peer.url)
    page.get_by_role("button", name="Discover and save").click()
    expect(page.locator("#oauth-status")).to_contain_text("This server needs authorization")
    server_page = page.url
    page.get_by_role("link", name="OAuth client settings").click()
    page.get_by_label("Grant type").select_option("client_credentials")
    page.get_by_label("Client ID").fill(MACHINE)
    page.get_by_label("Client secret").fill(SECRET)
    page.get_by_role("button", name="Save").click()
    bound = f"{machine_peer.base}/as"
    expect(page.locator("#oauth-issuer")).to_contain_text(bound)  # where the secret may go
    page.get_by_role("button", name=re.compile("Discover again")).click()
    expect(page.locator("#oauth-status")).to_contain_text("Authorized")

    run_tool(page, NAME, "slow_count", n=400, delay=0.5)
    control(machine_peer, authorization_servers=[hostile.issuer], revoke=True)
    try:
        page.goto(server_page)
        reload_until(page, "#oauth-confirm-issuer")
        status = page.locator("#oauth-status")
        expect(status).to_contain_text(f"The authorization server changed from {bound} to {hostile.issuer}")
        assert hostile.seen == []
        page.locator("#oauth-confirm-issuer").get_by_role("button").click()
        expect(page.get_by_text(f"now uses the authorization server {hostile.issuer}")).to_be_visible()
        expect(status).to_contain_text("enter the client ID and secret (or key) registered there")
        # Confirmed, it may be read like any authorization server (its public metadata, which the
        # worker fetches when its next poll is refused): nothing else, and nothing it could use.
        public = [s for s in hostile.seen if s.method == "GET" and s.path.startswith("/.well-known/")]
        assert public == hostile.seen and not any(s.body for s in public), hostile.seen
        assert not any("Authorization" in seen.headers for seen in hostile.seen)
        assert SECRET.encode() not in hostile.everything and MACHINE.encode() not in hostile.everything
    finally:
        control(machine_peer, reset=True)


def test_a_webhook_to_an_internal_address_is_refused_on_the_form(logged_in: Callable[..., Page]) -> None:
    page = logged_in("vera")  # any viewer may set a webhook
    page.goto("/notifications/")
    page.get_by_label(re.compile("Webhook URL")).fill("http://169.254.169.254/latest/meta-data/")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".errorlist")).to_contain_text(
        "This webhook URL cannot be used: 169.254.169.254 is a loopback, private or link-local address"
    )
