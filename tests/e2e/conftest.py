"""Browser tests: `manage.py demo` in a subprocess (Daphne, worker, reference server) and Chromium.

The app runs in its own process on its own SQLite file; these tests never touch the ORM in-process.
They see only what a user sees: pages, their live updates, and HTTP status codes.
"""

import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

from tests.peers.launch import free_port

# Playwright's sync API runs an event loop in this thread; Django's async-safety check would fire.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
READY = "MCP Tasks Dashboard:"
STARTUP_SECONDS = 60.0
STOP_SECONDS = 30.0
# A task of a few seconds plus the worker's reaction; a failing expectation still fails fast enough.
expect.set_options(timeout=15_000)

VIEWER, OPERATOR = "vera", "otto"
CREATE_USERS = """
import os
from django.contrib.auth.models import Group, User
from tasksapp.permissions import ensure_roles
ensure_roles()
for name, role in (("vera", "viewer"), ("otto", "operator")):
    user = User.objects.create_user(name, password=os.environ["E2E_PASSWORD"])
    user.groups.add(Group.objects.get(name=role))
"""


@dataclass
class Demo:
    base: str  # http://127.0.0.1:PORT, no trailing slash
    mcp_url: str
    password: str  # of every user: demo (admin), vera (viewer), otto (operator)
    output: list[str]
    sink: str  # the outbox sink's page (what the demo's email and webhooks sent), trailing slash
    env: dict[str, str] = field(default_factory=dict)  # for manage.py commands on the demo's database


@pytest.fixture(scope="package")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`manage.py demo` on free ports and a fresh database; Ctrl-C (SIGINT) must stop it cleanly."""
    var = tmp_path_factory.mktemp("e2e")
    password = secrets.token_urlsafe(12)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{var}/e2e.sqlite3",
        "DASHBOARD_VAR_DIR": str(var),
        "PYTHONUNBUFFERED": "1",
        "E2E_PASSWORD": password,
    }
    for name in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL", "DEBUG"):
        env.pop(name, None)
    port, mcp_port, mail_port, sink_port = (free_port() for _ in range(4))
    command = [sys.executable, "manage.py", "demo", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--mcp-port", str(mcp_port), f"--password={password}"]  # a random one may start with "-"
    command += ["--mail-port", str(mail_port), "--sink-port", str(sink_port)]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C must reach it even when pytest was started with SIGINT ignored (a background job).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    output: list[str] = []
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process, output, lines), daemon=True)
    pump.start()
    try:
        base, mcp_url = _wait_for_urls(lines, output)
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", CREATE_USERS],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        sink = f"http://127.0.0.1:{sink_port}/"
        yield Demo(base=base, mcp_url=mcp_url, password=password, output=output, sink=sink, env=env)
    finally:
        code: int | None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            code = process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
        pump.join(10)  # the last lines, once the pipe closes
    log = "".join(output[-60:])
    assert code == 0, f"manage.py demo did not exit cleanly on SIGINT (exit {code}):\n{log}"
    assert "stopped cleanly" in log, log


def _pump(process: subprocess.Popen[str], output: list[str], lines: "queue.Queue[str | None]") -> None:
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)
        lines.put(line)
    lines.put(None)


def _wait_for_urls(lines: "queue.Queue[str | None]", output: list[str]) -> tuple[str, str]:
    """Read the banner: the dashboard's URL, then the reference MCP server's."""
    base = mcp_url = ""
    while not mcp_url:
        try:
            line = lines.get(timeout=STARTUP_SECONDS)
        except queue.Empty:
            line = None
        if line is None:
            raise RuntimeError("manage.py demo did not start:\n" + "".join(output[-40:]))
        if line.startswith(READY):
            base = line.split()[-1].rstrip("/")
        elif base and "reference MCP server:" in line:
            mcp_url = line.split("reference MCP server:", 1)[1].split()[0]  # the URL, then a note
    return base, mcp_url


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed browser test shows what the dashboard logged meanwhile (a 500, a traceback)."""
    report: pytest.TestReport = yield
    funcargs = getattr(item, "funcargs", {})
    demo, browser_log = funcargs.get("demo"), funcargs.get("browser_log")
    if report.failed and isinstance(demo, Demo):
        report.sections.append(("manage.py demo: its last 80 lines", "".join(demo.output[-80:])))
    if report.failed and browser_log:
        report.sections.append(("the browser's console and page errors", "\n".join(browser_log[-80:])))
    return report


@pytest.fixture
def browser_log() -> list[str]:
    """What the pages of this test logged to the console, and their uncaught errors."""
    return []


@pytest.fixture(scope="package")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def new_context(
    chromium: Browser, demo: Demo, browser_log: list[str]
) -> Iterator[Callable[..., BrowserContext]]:
    """Contexts are separate browsers as far as cookies go: one per user."""
    contexts: list[BrowserContext] = []

    def make(**options: object) -> BrowserContext:
        context = chromium.new_context(base_url=demo.base, **options)  # type: ignore[arg-type]
        number = len(contexts) + 1
        context.on("console", lambda msg: browser_log.append(f"[{number}] {msg.type}: {msg.text}"))
        context.on("weberror", lambda error: browser_log.append(f"[{number}] page error: {error.error}"))
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def logged_in(new_context: Callable[..., BrowserContext], demo: Demo) -> Callable[..., Page]:
    """A page in a fresh context, logged in as `username` (demo, vera or otto)."""

    def make(username: str = "demo", **options: object) -> Page:
        page = new_context(**options).new_page()
        login(page, username, demo.password)
        return page

    return make


# --- helpers ------------------------------------------------------------------------------


def login(page: Page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("header .who")).to_contain_text(username)
    expect(page).not_to_have_url(re.compile(r"/login/"))


def open_tool(page: Page, server: str, tool: str) -> None:
    """Servers → the server → the tool's Run link, as a user would get there."""
    page.goto("/servers/")
    link = page.locator("#live-region").get_by_role("link", name=server, exact=True)
    link.click()
    on_server = re.compile(r"/servers/\d+/tools/$")
    try:
        expect(page).to_have_url(on_server, timeout=5_000)
    except AssertionError:
        # A live update that replaces the list between the press and the release of the mouse
        # button leaves no click (as it would for a person): click again.
        link.click()
        expect(page).to_have_url(on_server)
    row = page.locator("tbody tr").filter(has=page.get_by_text(tool, exact=True))
    row.get_by_role("link", name="Run").click()
    expect(page.locator("#run-form")).to_be_visible()


def run_tool(page: Page, server: str, tool: str, **arguments: object) -> int:
    """Run a task tool from its form; returns the pk of the task page it lands on."""
    open_tool(page, server, tool)
    form = page.locator("#run-form")
    for name, value in arguments.items():
        form.get_by_label(name, exact=True).fill(str(value))
    page.locator("#run-button").click()
    return task_pk(page)


def task_pk(page: Page) -> int:
    """The pk of the task page this page is on (or is being sent to)."""
    expect(page).to_have_url(re.compile(r"/tasks/\d+/$"))
    match = re.search(r"/tasks/(\d+)/$", page.url)
    assert match, page.url
    return int(match.group(1))


def badge(page: Page) -> Locator:
    """The status badge on a task's page."""
    return page.locator("#task-card .badge")


def expect_live(page: Page) -> None:
    """The page's websocket is up (app.js reports htmx's wsOpen)."""
    expect(page.locator("#live-indicator")).to_have_text("live")
    expect(page.locator("body")).to_have_attribute("data-live", "up")


def mark_window(page: Page) -> None:
    """A marker that survives only as long as no navigation or reload happens."""
    page.evaluate("window.__e2eMarker = 'still here'")


def expect_not_navigated(page: Page) -> None:
    assert page.evaluate("window.__e2eMarker") == "still here", "the page was reloaded or navigated"


def fill_contact_form(question: Locator) -> None:
    """Answers the demo server's contact form in `question` and sends it."""
    expect(question).to_contain_text("Please fill in your contact details.")
    question.get_by_label("Full name").fill("Ada Lovelace")
    question.get_by_label("Email").fill("ada@example.com")
    question.get_by_label("Plan").select_option("pro")
    question.get_by_role("button", name="Accept and send").click()
