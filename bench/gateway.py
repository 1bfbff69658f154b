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
   Target: at most 1.5 times direct.
3. **Ten agents polling one task**: a `manage.py worker` runs (it polls the task at its
   pollIntervalMs, 1000 ms, and stamps the mirror's freshness), and each agent polls tasks/get
   through the gateway every pollIntervalMs for --poll-seconds; the upstream's own count of
   tasks/get (its /_debug/stats) against what one poller at that interval makes.

Requests are sequential on one keep-alive connection per client (latency, not throughput); every
process shares the machine's cores, so read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
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


def timed(fn: Any, n: int) -> list[float]:
    for _ in range(min(20, n)):  # warm connections, caches and the JIT of every layer
        fn()
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
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
        import json

        made = json.loads(setup.stdout.strip().splitlines()[-1])
        port = free_port()
        daphne = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "dashboard.asgi:application",
        ]
        processes.append(
            subprocess.Popen(
                daphne,
                cwd=ROOT,
                env={**env, "LOG_LEVEL": "WARNING"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        gateway_url = f"http://127.0.0.1:{port}/gateway/{made['server']}/mcp"
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        direct, through = Agent(demo.url), Agent(gateway_url, made["tokens"][0])
        print(f"bench/gateway.py: {args.calls} sequential requests per figure, {os.cpu_count()} cores\n")

        echo = {"name": "echo", "arguments": {"text": "hello"}}
        compare(
            "tools/call echo (answered at once)",
            timed(lambda: direct.call("tools/call", echo, "echo"), args.calls),
            timed(lambda: through.call("tools/call", echo, "echo"), args.calls),
        )
        slow = {"name": "run_forever", "arguments": {"delay": 30, "poll_interval_ms": 60_000}}
        own = direct.call("tools/call", slow, "run_forever")["taskId"]
        mirrored = through.call("tools/call", slow, "run_forever")["taskId"]
        compare(
            "tasks/get of a working task (the gateway's from the mirror)",
            timed(lambda: direct.call("tasks/get", {"taskId": own}, own), args.calls),
            timed(lambda: through.call("tasks/get", {"taskId": mirrored}, mirrored), args.calls),
        )

        worker = [sys.executable, "manage.py", "worker", "--no-listen", "--name", "bench-gateway"]
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
