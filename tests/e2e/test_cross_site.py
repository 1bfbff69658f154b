"""Another site in the same browser: its links to the dashboard's exports are refused (Chromium
says Sec-Fetch-Site: cross-site), while the export links on the dashboard's own pages work."""

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo

pytestmark = pytest.mark.browser


@pytest.fixture
def other_site(demo: Demo) -> Iterator[str]:
    """A page on another site (localhost, not 127.0.0.1) linking to the exports."""
    page = (
        f'<!doctype html><title>cats</title><a id="csv" href="{demo.base}/tasks/export.csv">cats.csv</a>'
        f'<img alt="" src="{demo.base}/audit/export.jsonl">'
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://localhost:{server.server_address[1]}/"
    server.shutdown()


def test_another_sites_export_links_are_refused_and_the_dashboards_work(
    logged_in: Callable[..., Page], other_site: str
) -> None:
    page = logged_in("vera")
    page.goto("/audit/?action=export")
    exports_before = page.locator("table").first.locator("tbody tr").all_inner_texts()

    evil = page.context.new_page()
    with evil.expect_response(lambda response: "/audit/export.jsonl" in response.url) as image:
        evil.goto(other_site)
    assert image.value.status in (302, 403)  # SameSite=Lax: an image carries no session; else refused
    evil.locator("#csv").click()
    expect(evil.locator(".card")).to_contain_text("Another site asked for this, so it was refused.")

    page.goto("/tasks/")
    with page.expect_download() as download:
        page.locator("#list-sorting").get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename == "tasks.csv"
    page.goto("/audit/?action=export")
    rows = page.locator("table").first.locator("tbody tr")
    expect(rows.filter(has_text="vera")).to_have_count(
        sum("vera" in row for row in exports_before if "exported" in row) + 1
    )
