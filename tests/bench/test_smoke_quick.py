"""Smoke runs of the benchmarks that need neither PostgreSQL, Redis nor a browser: each finishes at a
tiny size and prints its figures. Nothing here is timed (the figures are the scripts' business)."""

import json
import subprocess
import sys

import httpx
import pytest

from tests.bench.script import NUMBER, ROOT, figures, run

pytestmark = pytest.mark.bench


def test_sse_prints_cpu_per_stream() -> None:
    output = run("sse.py", "--mib", "0.05", "--repeat", "1")
    streams = figures(output, rf"^  (one-line|small|keepalive)\s+{NUMBER} s CPU\s+(\d+) events")
    assert [name for name, _ in streams] == ["one-line", "small", "keepalive"]
    assert {name: int(events) for name, events in streams}["small"] > 0


def test_transport_prints_client_cpu_per_request() -> None:
    output = run(
        "transport.py", "--requests", "40", "--warmup", "5", "--concurrency", "2", "--repeat", "1",
        "--no-pin", "--cases", "aiohttp,mcp/default",
    )  # fmt: skip
    rows = figures(output, rf"^\| .*\[(aiohttp|mcp/default)\]\s+\|\s+({NUMBER}) \|")
    assert sorted(name for name, _ in rows) == ["aiohttp", "mcp/default"]
    assert "Recommendation: default McpClient transport" in output


def test_minimal_server_answers_discover_and_tasks_get() -> None:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "minimal_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/mcp"
        ask = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": "t-1"}}
        answer = httpx.post(url, json=ask, timeout=10).json()
        assert answer["result"]["taskId"] == "t-1" and answer["result"]["status"] == "working"
        discover = {"jsonrpc": "2.0", "id": 8, "method": "server/discover", "params": {}}
        assert "result" in httpx.post(url, content=json.dumps(discover), timeout=10).json()
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server stops when its stdin closes
        assert server.wait(20) == 0


def test_ui_list_prints_each_url_at_each_size() -> None:
    output = run("ui.py", "list", "--sizes", "60", "--requests", "1", "--warmup", "0", "--sql-runs", "1")
    rows = figures(output, rf"^(overview /|inbox|default \(newest first\))\s+{NUMBER} / {NUMBER} ms, (\d+) q")
    assert len(rows) == 3


def test_ui_loaded_prints_today_beside_before_issue_13() -> None:
    output = run(
        "ui.py", "loaded", "--tasks", "300", "--open-requests", "5", "--alone", "1", "--users", "2",
        "--seconds", "0.3", "--viewers", "2",
    )  # fmt: skip
    rows = figures(output, rf"^\| (overview /|inbox|task list) \| (before|today) \| {NUMBER} \|")
    assert len(rows) == 5  # the overview and the inbox before and today, the task list today
    assert "0 failed" in output and "live overview refresh" in output
