"""Screenshots of the dashboard for the docs, taken from a real `manage.py demo` in Chromium.

    .venv/bin/python bench/screenshots.py [--out docs/screenshots] [--keep] [--views VIEWS]

1. starts `manage.py demo` (Daphne + websockets, the worker, the reference MCP server, one
   process) on free loopback ports with a fresh SQLite database in a temp dir;
2. logs in as `demo` in Debian's Chromium (/usr/bin/chromium, never a downloaded browser);
3. creates data the way people do: rich_result and ask_form from the tool-run form in the
   browser, the rest with `manage.py call reference <tool>` subprocesses (three completed
   slow_count, one running slow_count, fail_tool, fail_rpc, and a run_forever cancelled with
   `manage.py tasks cancel`);
4. waits (bounded) until the worker has settled every task;
5. saves full-page PNGs, 1280 px wide: overview, task-list, task-detail (the completed
   rich_result), task-running (the running slow_count and its timeline), elicitation-form (the
   ask_form task page: every field type) and inbox; then, for every other view in --views
   (theme:width:language; by default 390, 1280 and 1920 px, light and dark, English and Chinese:
   DEFAULT_VIEWS), overview, task-list, task-detail, task-running and inbox again, named e.g.
   overview-dark.png, overview-390.png, overview-1920-zh-hans.png (the theme is the browser's
   prefers-color-scheme, the language its Accept-Language; Chinese needs a CJK font installed,
   e.g. Debian's fonts-noto-cjk, which `.ci/setup --test` installs);
6. stops the demo with SIGINT and checks it said "stopped cleanly".

`Demo` and `browser()` are reused by bench/ui.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
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
READY = "Ctrl-C stops everything."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Demo:
    """`manage.py demo` in a subprocess, on free ports, with its own temp dir and SQLite file."""

    def __init__(self, var_dir: Path | None = None) -> None:
        self.var_dir = var_dir or Path(tempfile.mkdtemp(prefix="dash-demo-"))
        self.port = free_port()
        self.mcp_port = free_port()
        while self.mcp_port == self.port:
            self.mcp_port = free_port()
        self.password = secrets.token_urlsafe(12)
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DASHBOARD_VAR_DIR": str(self.var_dir),
            "DATABASE_URL": f"sqlite:///{self.var_dir / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("REDIS_URL", None)  # the demo is the in-memory channel layer, one process
        self.proc: subprocess.Popen[str] | None = None
        self.stop_note = ""
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []

    def start(self, timeout: float = 90.0) -> None:
        argv = [PYTHON, "manage.py", "demo", "--host", "127.0.0.1", "--port", str(self.port)]
        argv += ["--mcp-port", str(self.mcp_port), f"--password={self.password}"]  # it may start with "-"
        argv += ["--mail-port", str(free_port()), "--sink-port", str(free_port())]
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            if READY in line:
                self._wait_http(deadline)
                return
        self.stop()
        raise RuntimeError("the demo did not start:\n" + "".join(self.output[-40:]))

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)

    def _wait_http(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
                return
            time.sleep(0.1)
        raise RuntimeError("the dashboard port never opened")

    def manage(self, *args: str, timeout: float = 60.0) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        out = self.manage("call", "reference", tool, json.dumps(arguments or {}), "--json")
        return dict(json.loads(out))

    def stop(self, timeout: float = 60.0) -> bool:
        """SIGINT, as Ctrl-C; True if it said 'stopped cleanly' and exited 0 (else `stop_note` says
        what happened instead)."""
        if self.proc is None or self.proc.poll() is not None:
            early = f"exited {self.proc.returncode} before" if self.proc is not None else ""
            self.stop_note = early or "it was not running"
            return self.proc is not None and self.proc.returncode == 0
        self.proc.send_signal(signal.SIGINT)
        began = time.monotonic()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.stop_note = f"still running {timeout:.0f} s after SIGINT: killed"
            return False
        self.reader.join(10)  # its last lines: the process has exited, its pipe ends
        said = any("stopped cleanly" in line for line in self.output)
        self.stop_note = f"exit code {code} after {time.monotonic() - began:.1f} s" + (
            "" if said else ", without saying 'stopped cleanly'"
        )
        return code == 0 and said

    def setup_django(self) -> None:
        """Point this process's Django at the demo's database (read-mostly: waits, task ids)."""
        os.environ.update({k: self.env[k] for k in ("DASHBOARD_VAR_DIR", "DATABASE_URL")})
        os.environ["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import django

        django.setup()


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def login(page: Any, demo: Demo) -> None:
    page.goto(f"{demo.url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", demo.password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{demo.url}/", timeout=15000)


def wait_live(page: Any, timeout_ms: int = 10000) -> None:
    """The websocket is up (app.js sets body[data-live=up] on htmx:wsOpen). Waited with `expect`:
    wait_for_function's polling evaluates a string in the page, which the CSP forbids."""
    from playwright.sync_api import expect

    expect(page.locator("body")).to_have_attribute("data-live", "up", timeout=timeout_ms)


def run_from_form(page: Any, demo: Demo, server_pk: int, tool: str, fields: dict[str, str]) -> int:
    """Start a tool from its form in the browser; returns the new task's pk (from the redirect)."""
    page.goto(f"{demo.url}/servers/{server_pk}/tools/{tool}/run/")
    for name, value in fields.items():
        page.fill(f"#run-form [name={name}]", value)
    page.click("#run-button")
    page.wait_for_url("**/tasks/*/", timeout=15000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def wait_until(what: str, check: Any, timeout: float = 60.0, every: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


def shoot(page: Any, path: Path) -> None:
    page.wait_for_load_state("networkidle")
    with contextlib.suppress(Exception):
        wait_live(page, 5000)
    page.evaluate("document.fonts.ready")
    page.screenshot(path=str(path), full_page=True)
    print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


DEFAULT_VIEW = ("light", 1280, "en")
DEFAULT_VIEWS = ",".join(
    [
        "light:1280:en",
        "dark:1280:en",
        "light:390:en",
        "dark:390:en",
        "light:1920:en",
        "dark:1920:zh-Hans",
        "light:1280:zh-Hans",
        "light:390:zh-Hans",
    ]
)
VIEW_PAGES = ("overview", "task-list", "task-detail", "task-running", "inbox")


def parse_views(text: str) -> list[tuple[str, int, str]]:
    """ "dark:390:en,light:1280:zh-Hans" -> [("dark", 390, "en"), ("light", 1280, "zh-Hans")]."""
    views = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        theme, width, language = ([*item.split(":"), "", ""])[:3]
        if theme not in ("light", "dark") or not width.isdigit():
            raise SystemExit(f"--views: {item!r} is not theme:width[:language] (theme light or dark)")
        views.append((theme, int(width), language or "en"))
    return views


def view_suffix(view: tuple[str, int, str]) -> str:
    theme, width, language = view
    parts = [theme if theme != DEFAULT_VIEW[0] else "", str(width) if width != DEFAULT_VIEW[1] else ""]
    parts.append(language.lower() if language != DEFAULT_VIEW[2] else "")
    return "".join(f"-{part}" for part in parts if part)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database) afterwards")
    parser.add_argument(
        "--views",
        default=DEFAULT_VIEWS,
        help="theme:width:language, comma-separated; the first light:1280:en makes the plain names",
    )
    args = parser.parse_args()
    views = parse_views(args.views)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    demo = Demo()
    print(f"demo: {demo.url} (MCP :{demo.mcp_port}), database in {demo.var_dir}")
    demo.start()
    clean = False
    try:
        demo.setup_django()
        from django.db import close_old_connections

        from tasksapp.models import InputRequest, McpServer, RemoteTask

        def fresh() -> None:
            close_old_connections()

        server = McpServer.objects.get(name="reference")
        print(f"reference server #{server.pk}: {len(server.tools)} tools")

        # From the command line: three short counts, the failures, one long count, one cancelled.
        for n in (3, 5, 8):
            demo.call("slow_count", {"n": n, "delay": 0.2})
        fail_tool = demo.call("fail_tool")["task"]["id"]
        fail_rpc = demo.call("fail_rpc")["task"]["id"]
        forever = demo.call("run_forever", {"delay": 0.5})["task"]["id"]

        with browser() as chromium:
            context = chromium.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
            page = context.new_page()
            page.set_default_timeout(20000)
            login(page, demo)
            # From the browser: the rich result and the form elicitation (started_by = demo).
            rich = run_from_form(page, demo, server.pk, "rich_result", {})
            ask = run_from_form(page, demo, server.pk, "ask_form", {})
            running = demo.call("slow_count", {"n": 600, "delay": 1.0})["task"]["id"]

            def settled() -> bool:
                fresh()
                ticks = RemoteTask.objects.filter(pk=forever, events__status_message__startswith="tick 2")
                return ticks.exists()

            wait_until("run_forever to tick", settled, 30)
            demo.manage("tasks", "cancel", str(forever))

            def all_settled() -> bool:
                fresh()
                tasks = {t.pk: t for t in RemoteTask.objects.all()}
                terminal = [pk for pk, t in tasks.items() if pk not in (running, ask)]
                if not all(tasks[pk].is_terminal for pk in terminal):
                    return False
                asking = InputRequest.objects.filter(task_id=ask, state="open").exists()
                counted = (
                    tasks[running].status_message.startswith("counted ")
                    and int(tasks[running].status_message.split()[1].split("/")[0]) >= 4
                )
                return asking and counted

            wait_until("every task to settle", all_settled, 60)
            fresh()
            summary = {t.pk: (t.tool_name, t.display_status) for t in RemoteTask.objects.all()}
            print(
                "tasks:",
                ", ".join(f"#{pk} {tool} {status}" for pk, (tool, status) in sorted(summary.items())),
            )
            assert summary[fail_tool][1] == "completed with tool error", summary[fail_tool]
            assert summary[fail_rpc][1] == "failed", summary[fail_rpc]
            assert summary[rich][1] == "completed", summary[rich]

            print("screenshots:")
            page.goto(f"{demo.url}/")
            shoot(page, out / "overview.png")
            page.goto(f"{demo.url}/tasks/")
            shoot(page, out / "task-list.png")
            page.goto(f"{demo.url}/tasks/{rich}/")
            shoot(page, out / "task-detail.png")
            page.goto(f"{demo.url}/tasks/{running}/")
            shoot(page, out / "task-running.png")
            page.goto(f"{demo.url}/tasks/{ask}/")
            page.wait_for_selector("#task-inputs form.answer-form")
            shoot(page, out / "elicitation-form.png")
            page.goto(f"{demo.url}/inbox/")
            page.locator("details.inbox-item summary").first.click()  # the compact list: open one
            page.wait_for_selector(".input-request")
            shoot(page, out / "inbox.png")
            context.close()
            paths = {
                "overview": "/",
                "task-list": "/tasks/",
                "task-detail": f"/tasks/{rich}/",
                "task-running": f"/tasks/{running}/",
                "inbox": "/inbox/",
            }
            for view in views:
                if view == DEFAULT_VIEW:
                    continue
                theme, width, language = view
                context = chromium.new_context(
                    viewport={"width": width, "height": 800},
                    device_scale_factor=1,
                    color_scheme=theme,
                    locale=language,
                    extra_http_headers={"Accept-Language": language},
                )
                page = context.new_page()
                page.set_default_timeout(20000)
                login(page, demo)
                for name in VIEW_PAGES:
                    page.goto(f"{demo.url}{paths[name]}")
                    shoot(page, out / f"{name}{view_suffix(view)}.png")
                context.close()
    finally:
        clean = demo.stop()
        print(f"demo stopped with SIGINT: {'cleanly' if clean else 'NOT cleanly'} ({demo.stop_note})")
        if not clean:
            print("".join(demo.output[-150:]))
        if not args.keep:
            shutil.rmtree(demo.var_dir, ignore_errors=True)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
