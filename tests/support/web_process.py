"""The dashboard as an operator meets it, for the hostile-server tests: `manage.py demo` in its own
process (Daphne and the worker on one event loop, as in the demo) on a fresh database, and an
HTTP client logged in through the login form."""

import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.peers.launch import ROOT, free_port

READY = "MCP Tasks Dashboard:"


@dataclass
class Dashboard:
    base: str
    password: str
    pid: int
    output: list[str]

    def log(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:])

    def peak_rss_reset(self) -> None:
        """Start a new peak-memory measurement (Linux: clear_refs 5 resets VmHWM)."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def cpu_seconds(self) -> float:
        """User plus system CPU time the dashboard process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM")


@contextmanager
def running_dashboard(var: Path, extra_env: dict[str, str] | None = None) -> Iterator[Dashboard]:
    password = secrets.token_urlsafe(12)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{var}/web.sqlite3", "DASHBOARD_VAR_DIR": str(var)}
    env.update(extra_env or {})
    env["PYTHONUNBUFFERED"] = "1"
    for name in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL", "DEBUG"):
        env.pop(name, None)
    command = [sys.executable, "manage.py", "demo", "--host", "127.0.0.1", "--port", str(free_port())]
    command += ["--mcp-port", str(free_port()), f"--password={password}"]  # it may start with "-"
    command += ["--mail-port", str(free_port()), "--sink-port", str(free_port())]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output: list[str] = []
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        base = ""
        while not base:
            line = lines.get(timeout=60)
            if line is None:
                raise RuntimeError("manage.py demo did not start:\n" + "".join(output[-40:]))
            if line.startswith(READY):
                base = line.split()[-1].rstrip("/")
        yield Dashboard(base=base, password=password, pid=process.pid, output=output)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:  # e.g. stuck in a regular expression on the old code
            process.kill()
            process.wait()


class Operator:
    """A logged-in browser without JavaScript: cookies, CSRF tokens, forms."""

    def __init__(self, dashboard: Dashboard, *, timeout: float = 60.0) -> None:
        self.client = httpx.Client(base_url=dashboard.base, timeout=timeout)
        page = self.client.get("/login/")
        assert page.status_code == 200, page.text[:300]
        login = self.post("/login/", {"username": "demo", "password": dashboard.password})
        assert login.status_code == 302, login.text[:500]

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        token = self.client.cookies.get("csrftoken", "")
        return self.client.post(path, data={**data, "csrfmiddlewaretoken": token})

    def get(self, path: str) -> httpx.Response:
        return self.client.get(path)

    def close(self) -> None:
        self.client.close()
