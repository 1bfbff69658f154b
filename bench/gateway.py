"""The gateway's overhead, and what many agents polling one task cost the upstream.

    PYTHONPATH=$PWD .venv/bin/python bench/gateway.py [--calls 300] [--agents 10] [--poll-seconds 20]

In fresh processes on a fresh SQLite database: the reference server (`python -m tasksapp.demoserver
--debug`), Daphne serving `dashboard.asgi` (as `manage.py demo` and deploy.md run it), the server
registered, agents created; then, side by side in the same run:

1. **tools/call** (`echo`, answered at once): one client calling the upstream directly, then the
   same calls through the gateway (token check, envelope checks, Mcp-Param-*, relaying, audit):
   mean and p50/p99 latency, and the ratio gateway / direct.
2. **tasks/get** of one task, directly and through the gateway while the mirror is fresh (the task's
   pollIntervalMs is 60 s, so every gateway answer comes from the mirror): the same figures.
   Target: at most 1.5 times direct. Beside it, in the same run: a second Daphne with
   MCP_GATEWAY_CACHE_MS=0 (the caller and the task read from the database on every request, as
   before tasksapp/gateway/cache.py), and Daphne's own floor: a trivial ASGI application that
   answers the same bytes (what any answer from Daphne costs, whatever the gateway does).
3. **Ten agents polling one task**: a `manage.py worker` runs (it polls the task at its
   pollIntervalMs, 1000 ms, and stamps the mirror's freshness), and each agent polls tasks/get
   through the gateway every pollIntervalMs for --poll-seconds; the upstream's own count of
   tasks/get (its /_debug/stats) against what one poller at that interval makes.

Requests are sequential on one keep-alive connection per client (latency, not throughput); every
process shares the machine's cores, so read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.peers.launch import free_port, start_peer  # noqa: E402

SETUP = """
import json, os
from tasksapp import services
from tasksapp.services.agents import agent_create
server = services.server_create(name="demo", url=os.environ["BENCH_URL"], headers={}, user=None)
count = int(os.environ["BENCH_AGENTS"])
made = [agent_create(name=f"agent-{i}", servers=[server], user=None, rate_limit=10**6) for i in range(count)]
tokens = [token for _, token in made]
print(json.dumps({"server": server.pk, "tokens": tokens}))
"""


def envelope() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }


class Agent:
    """One MCP client on one keep-alive connection."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.client = httpx.Client(timeout=60)
        self.token = token
        self.ids = 0

    def call(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        self.ids += 1
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": envelope()}}
        response = self.client.post(self.url, json=body, headers=headers)
        message = response.json()
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result


def interleaved(fns: list[Any], n: int) -> list[list[float]]:
    """Each callable's latencies, called in turn (a, b, c, a, b, c, ...): a change in the machine's
    load falls on all of them alike, so their ratios hold even when absolute times do not."""
    for fn in fns:
        for _ in range(min(20, n)):
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(n):
        for fn, out in zip(fns, samples, strict=True):
            began = time.perf_counter()
            fn()
            out.append((time.perf_counter() - began) * 1000)
    return samples


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"mean {statistics.fmean(samples):6.2f} ms  p50 {statistics.median(samples):6.2f}  p99 {p99:6.2f}"


def compare(label: str, direct: list[float], gateway: list[float]) -> None:
    ratio = statistics.fmean(gateway) / statistics.fmean(direct)
    p50 = statistics.median(gateway) / statistics.median(direct)
    print(f"{label}\n  direct   {summary(direct)}\n  gateway  {summary(gateway)}")
    print(f"  ratio gateway/direct: mean {ratio:.2f}x, p50 {p50:.2f}x")


FLOOR_APP = b"""
BODY = %r


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})
"""


class FloorAgent(Agent):
    def call(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        self.ids += 1
        self.client.post(self.url, content=b"{}", headers={"Content-Type": "application/json"}).read()
        return {}


def start_daphne(port: int, env: dict[str, str], app: str = "dashboard.asgi:application") -> Any:
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app]
    return subprocess.Popen(
        command, cwd=ROOT, env={**env, "LOG_LEVEL": "WARNING"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def wait_for(url: str) -> None:
    for _ in range(600):
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)


def upstream_gets(base: str) -> int:
    return int(httpx.get(f"{base}/_debug/stats", timeout=10).json()["methods"].get("tasks/get", 0))


def poll_together(agents: list[Agent], task_id: str, seconds: float, interval: float) -> int:
    """Each agent polls tasks/get every `interval` from its own thread, for `seconds`; total polls."""
    counts = [0] * len(agents)
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        time.sleep(interval * i / len(agents))  # agents out of phase, as independent ones are
        while time.monotonic() < stop:
            agents[i].call("tasks/get", {"taskId": task_id}, task_id)
            counts[i] += 1
            time.sleep(interval)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(agents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--poll-seconds", type=float, default=20.0)
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    env = {**os.environ, "DASHBOARD_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{var}/db.sqlite3"}
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    demo = start_peer(
        "demoserver", [sys.executable, "-m", "tasksapp.demoserver", "--debug"], "demoserver listening on"
    )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        setup = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SETUP],
            cwd=ROOT, env={**env, "BENCH_URL": demo.url, "BENCH_AGENTS": str(args.agents)},
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        made = json.loads(setup.stdout.strip().splitlines()[-1])
        port, uncached_port, floor_port = free_port(), free_port(), free_port()
        processes.append(start_daphne(port, env))
        processes.append(start_daphne(uncached_port, {**env, "MCP_GATEWAY_CACHE_MS": "0"}))
        gateway_url = f"http://127.0.0.1:{port}/gateway/{made['server']}/mcp"
        uncached_url = f"http://127.0.0.1:{uncached_port}/gateway/{made['server']}/mcp"
        wait_for(f"http://127.0.0.1:{port}/healthz")
        wait_for(f"http://127.0.0.1:{uncached_port}/healthz")
        direct, through = Agent(demo.url), Agent(gateway_url, made["tokens"][0])
        print(f"bench/gateway.py: {args.calls} sequential requests per figure, {os.cpu_count()} cores\n")

        echo = {"name": "echo", "arguments": {"text": "hello"}}
        compare(
            "tools/call echo (answered at once)",
            *interleaved(
                [
                    lambda: direct.call("tools/call", echo, "echo"),
                    lambda: through.call("tools/call", echo, "echo"),
                ],
                args.calls,
            ),
        )
        slow = {"name": "run_forever", "arguments": {"delay": 30, "poll_interval_ms": 60_000}}
        own = direct.call("tools/call", slow, "run_forever")["taskId"]
        mirrored = through.call("tools/call", slow, "run_forever")["taskId"]
        sample = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "result": through.call("tasks/get", {"taskId": mirrored}, mirrored)},
            separators=(",", ":"),
        ).encode()
        (var / "bench_floor_app.py").write_bytes(FLOOR_APP % sample)
        processes.append(start_daphne(floor_port, {**env, "PYTHONPATH": str(var)}, "bench_floor_app:app"))
        floor_url = f"http://127.0.0.1:{floor_port}/"
        wait_for(floor_url)
        uncached, floor = Agent(uncached_url, made["tokens"][0]), FloorAgent(floor_url)
        direct_gets, gateway_gets, uncached_gets, floor_gets = interleaved(
            [
                lambda: direct.call("tasks/get", {"taskId": own}, own),
                lambda: through.call("tasks/get", {"taskId": mirrored}, mirrored),
                lambda: uncached.call("tasks/get", {"taskId": mirrored}, mirrored),
                lambda: floor.call("tasks/get", {}),
            ],
            args.calls,
        )
        compare("tasks/get of a working task (the gateway's from the mirror)", direct_gets, gateway_gets)
        compare("  the same, MCP_GATEWAY_CACHE_MS=0 (two database steps each)", direct_gets, uncached_gets)
        compare("  Daphne's floor: a trivial ASGI app answering the same bytes", direct_gets, floor_gets)

        worker = [sys.executable, "manage.py", "worker", "--no-listen", "--name", "bench-gateway"]
        # (a worker in its own process and no Redis: its changes reach the gateway's cache only by
        # its MCP_GATEWAY_CACHE_MS expiry; with Redis the live hub drops them at once)
        processes.append(
            subprocess.Popen(
                worker,
                cwd=ROOT,
                env={**env, "LOG_LEVEL": "WARNING"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        polled = {"name": "run_forever", "arguments": {"delay": 30, "poll_interval_ms": 1000}}
        task_id = through.call("tools/call", polled, "run_forever")["taskId"]
        time.sleep(3)  # the worker claims it
        # One agent's task is visible to that agent alone: its instances poll it, each on its own connection.
        agents = [Agent(gateway_url, made["tokens"][0]) for _ in range(args.agents)]
        before = upstream_gets(demo.base)
        polls = poll_together(agents, task_id, args.poll_seconds, 1.0)
        upstream = upstream_gets(demo.base) - before
        print(
            f"\n{args.agents} agent clients polling one task every pollIntervalMs (1000 ms) "
            f"for {args.poll_seconds:g} s, a worker running:\n"
            f"  agents' tasks/get through the gateway: {polls}\n"
            f"  the upstream's tasks/get (all pollers together): {upstream}\n"
            f"  one poller at 1000 ms would make about {args.poll_seconds:g}"
        )
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        demo.stop()


if __name__ == "__main__":
    main()
