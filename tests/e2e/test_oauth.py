"""OAuth end to end in Chromium: an admin adds a protected server, connects through the local
authorization server's consent page, runs a task that the worker polls with the token (renewed
while it runs), sees a refused refresh on the server and task pages, reconnects, and steps up
to a wider scope for a tool that needs one (tests/oauth/peer.py)."""

import re
import sys
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import run_tool
from tests.oauth.conftest import control
from tests.oauth.peer import READY
from tests.peers.launch import RunningPeer, running

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def guarded() -> Iterator[RunningPeer]:
    """Polled, not pushed (--no-listen), so the worker needs fresh tokens while a task runs."""
    argv = [sys.executable, "-m", "tests.oauth.peer", "--step-up-tool", "greet", "--no-listen"]
    argv += ["--token-seconds", "3"]
    with running("oauth-peer", argv, READY) as peer:
        yield peer


def consent(page: Page, *, scopes: str = "mcp:read") -> None:
    """Connect (or Re-authorize) on the server page, then Approve at the authorization server."""
    page.locator("#oauth-connect").click()
    expect(page.locator("#scopes")).to_contain_text(scopes)
    page.locator("#approve").click()
    expect(page.locator("#oauth-status")).to_contain_text("Authorized by demo")


def server_page(page: Page) -> None:
    page.goto("/servers/")
    page.locator("#live-region").get_by_role("link", name="guarded", exact=True).click()


def test_connect_poll_refresh_lose_reconnect_and_step_up(
    logged_in: Callable[..., Page], guarded: RunningPeer
) -> None:
    page = logged_in("demo")
    page.goto("/servers/add/")
    page.get_by_label("Name").fill("guarded")
    page.get_by_label("MCP endpoint URL").fill(guarded.url)
    page.get_by_role("button", name="Discover and save").click()
    status = page.locator("#oauth-status")
    expect(status).to_contain_text("This server needs authorization")

    consent(page, scopes="mcp:read offline_access")
    expect(page.get_by_text("slow_count", exact=True)).to_be_visible()  # discovered with the token

    refreshes = control(guarded)["refresh_attempts"]
    pk = run_tool(page, "guarded", "slow_count", n=10, delay=0.5)
    expect(page.locator("#task-card h1 .badge")).to_have_text("completed")
    assert control(guarded)["refresh_attempts"] > refreshes, "the 3 s token was renewed while the task ran"

    # The authorization server stops renewing: the operator sees it; the task is kept.
    second = run_tool(page, "guarded", "slow_count", n=6, delay=0.5)
    control(guarded, refuse_refresh=True)
    page.goto("/servers/")  # its rows are live: the state arrives without a reload
    row = page.locator("#live-region tr", has=page.get_by_role("link", name="guarded", exact=True))
    expect(row.locator(".oauth-badge")).to_have_text("Authorization needed", timeout=20_000)
    page.goto(f"/tasks/{second}/")
    expect(page.locator(".oauth-badge")).to_have_text("Authorization needed")
    expect(page.locator("#task-card h1 .badge")).not_to_have_text(re.compile("expired|failed|completed"))
    server_page(page)
    expect(status).to_contain_text("Authorization needed")
    expect(status).to_contain_text("kept")

    control(guarded, refuse_refresh=False)
    consent(page)
    page.goto(f"/tasks/{second}/")
    expect(page.locator("#task-card h1 .badge")).to_have_text("completed", timeout=40_000)
    expect(page.locator(".oauth-badge")).to_have_count(0)
    assert pk != second

    # greet needs mcp:write: the server refuses with insufficient_scope, the page asks for more.
    run_greet(page)
    server_page(page)
    expect(status).to_contain_text("Needs wider access")
    expect(status).to_contain_text("mcp:write")
    consent(page, scopes="mcp:write")
    run_greet(page)
    expect(page.locator("body")).to_contain_text("Hello, Ada!")


def run_greet(page: Page) -> None:
    page.goto("/servers/")
    page.locator("#live-region").get_by_role("link", name="guarded", exact=True).click()
    row = page.locator("tbody tr").filter(has=page.get_by_text("greet", exact=True))
    row.get_by_role("link", name="Run").click()
    page.locator("#run-form").get_by_label(re.compile(r"^name\b")).fill("Ada")  # "name *": required
    page.locator("#run-button").click()
    page.wait_for_load_state()
