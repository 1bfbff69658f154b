"""`python -m tasksapp.demoserver` as a process: the ready line, options, clean signal stops."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from .wire import SUBSCRIPTION, Wire, envelope, sse_events

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def demoserver(*options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    command = [sys.executable, "-m", "tasksapp.demoserver", "--port", str(port), *options]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == f"demoserver listening on http://127.0.0.1:{port}/mcp\n"
        yield process, line.split()[-1]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_ends_listen_streams_gracefully_and_exits_zero(sig: signal.Signals) -> None:
    with demoserver("--keepalive-seconds", "0.2", "--log-level", "warning") as (process, url):
        wire = Wire(url)
        body = {
            "jsonrpc": "2.0",
            "id": "L",
            "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": envelope()},
        }
        headers = wire.headers("subscriptions/listen")
        with wire.http.stream("POST", url, json=body, headers=headers) as response:
            events = (e.message for e in sse_events(response) if e.message)
            assert next(events)["method"] == "notifications/subscriptions/acknowledged"
            process.send_signal(sig)
            final = next(events)
            assert final["id"] == "L"
            assert final["result"]["_meta"][SUBSCRIPTION] == "L"
            assert list(events) == []
        wire.close()
        assert process.wait(10) == 0


def test_options_reach_the_app() -> None:
    with demoserver("--poll-interval-ms", "1234", "--debug") as (_, url):
        wire = Wire(url)
        created = wire.start("slow_count", {"n": 0})
        assert created["pollIntervalMs"] == 1234
        assert wire.debug("stats")["methods"]["tools/call"] == 1
        wire.close()


def test_debug_is_off_by_default() -> None:
    with demoserver() as (_, url):
        assert httpx.get(url.replace("/mcp", "/_debug/stats")).status_code == 404


def test_bad_options_fail_with_a_message() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tasksapp.demoserver", "--poll-interval-ms", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert "--poll-interval-ms" in run.stderr
