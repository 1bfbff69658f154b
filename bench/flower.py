"""Ahead of Flower? (issue 24 goal 4): the dashboard's task list beside Flower's, on the same machine
and task count, alone and under 20 users, interleaved in one run.

    flock /tmp/heavy.lock env PYTHONPATH=$PWD .venv/bin/python bench/flower.py [--tasks 14000] [--rounds 3]

Flower (the dashboard Celery users compare against) is installed in a venv of its own the first
time (FLOWER_VENV, default ~/.cache/mcp-tasks-dashboard/flower-<version>; pip needs PyPI once) and
given --tasks tasks in its persistent state file: the events a Celery worker would have sent
(received, started, then succeeded, failed or still running), fed through Flower's own EventsState
and saved as Flower saves it, so it starts with them as after a restart. It serves on Tornado,
one process, as `celery flower` runs; its broker (Redis) only carries its periodic enable-events
broadcast here.

The dashboard: a fresh PostgreSQL database with the same number of tasks (bench/ui.py's mix),
served by one Daphne process as in production, an operator logged in through the login form.

What a person waits for to see the first page of the newest tasks, 50 rows (Flower's largest
page but one; ours is 50):
- dashboard: GET /tasks/ (the rows are in the HTML);
- Flower: GET /tasks (the page) and then POST /tasks/datatable (the rows, as its DataTable asks:
  newest received first, 50 rows); "datatable only" is the second request alone, what paging and
  sorting cost.

Each round, in turn: each server alone (--requests sequential page loads: p50 and p99 latency, the
server's CPU per page), then each under --users users (asyncio, one httpx client each, no think
time, --seconds seconds: pages per second, latency p50/p99, server CPU per page). The load
generator runs in this process on the same cores, and pays twice for Flower's two requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import serving  # noqa: E402

FLOWER_VERSION = "2.2.0"
REDIS_URL = "redis://127.0.0.1:6379/13"
ROWS = 50
COLUMNS = ("name", "uuid", "state", "received", "runtime", "worker")  # Flower's default columns

# Run by Flower's own Python: the events a worker would send for each task, through EventsState.
FLOWER_STATE = r"""
import random, shelve, sys, time, uuid
from flower.events import EventsState

path, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
state = EventsState(max_tasks_in_memory=count)
now = time.time()
clock = 0
names = ["reports.nightly", "billing.invoice", "mail.digest", "etl.load", "ml.train"]
for i in range(count):
    task = str(uuid.UUID(int=rng.getrandbits(128)))
    received = now - 10 * (count - i)
    name = rng.choice(names)
    common = {"uuid": task, "hostname": f"celery@worker{i % 4}", "pid": 100 + i % 4}
    clock += 1
    state.event({**common, "type": "task-received", "name": name, "args": f"({i},)", "kwargs": "{}",
                 "retries": 0, "eta": None, "expires": None, "root_id": task, "parent_id": None,
                 "timestamp": received, "local_received": received, "clock": clock})
    clock += 1
    state.event({**common, "type": "task-started", "timestamp": received + 0.1,
                 "local_received": received + 0.1, "clock": clock})
    outcome = rng.random()
    if outcome < 0.85:
        clock += 1
        state.event({**common, "type": "task-succeeded", "result": f"'done {i}'",
                     "runtime": rng.uniform(0.1, 30), "timestamp": received + 5,
                     "local_received": received + 5, "clock": clock})
    elif outcome < 0.95:
        clock += 1
        state.event({**common, "type": "task-failed", "exception": "ValueError('bad input')",
                     "traceback": "Traceback ...", "timestamp": received + 2,
                     "local_received": received + 2, "clock": clock})
with shelve.open(path, flag="n") as saved:
    saved["events"] = state
    saved["counter"] = dict(state.counter)
print(len(state.tasks))
"""


def flower_venv() -> Path:
    """Flower in a venv of its own, made on first use."""
    default = Path.home() / ".cache" / "mcp-tasks-dashboard" / f"flower-{FLOWER_VERSION}"
    venv = Path(os.environ.get("FLOWER_VENV", default))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"flower=={FLOWER_VERSION}", "redis", "packaging"],
            check=True,
        )
    return venv


def flower_state(venv: Path, path: Path, tasks: int) -> None:
    started = time.perf_counter()
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", FLOWER_STATE, str(path), str(tasks)],
        check=True,
        capture_output=True,
        text=True,
    )
    print(f"Flower: {out.stdout.strip()} tasks in its state ({time.perf_counter() - started:.0f} s)")


def datatable_form() -> dict[str, str]:
    """What Flower's DataTable posts for the first page, newest received first."""
    form = {"draw": "1", "start": "0", "length": str(ROWS), "search[value]": "", "search[regex]": "false"}
    form.update({"order[0][column]": str(COLUMNS.index("received")), "order[0][dir]": "desc"})
    for i, name in enumerate(COLUMNS):
        form.update({f"columns[{i}][data]": name, f"columns[{i}][orderable]": "true"})
    return form


class Target:
    """One server and how a person loads its first page of tasks."""

    def __init__(self, name: str, pid: int, base: str, cookies: httpx.Cookies, steps: list[tuple[str, str]]):
        self.name, self.pid, self.base, self.cookies, self.steps = name, pid, base, cookies, steps

    async def load(self, client: httpx.AsyncClient) -> None:
        for method, path in self.steps:
            if method == "GET":
                response = await client.get(path)
            else:
                response = await client.post(path, data=datatable_form())
            assert response.status_code == 200, (self.name, path, response.status_code)
            if path.endswith("datatable"):
                assert len(response.json()["data"]) == ROWS, response.text[:300]
            elif self.name == "dashboard":
                assert response.text.count('id="task-row-') == ROWS, "not a full page of rows"

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, cookies=self.cookies, timeout=60)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


async def alone(target: Target, requests: int) -> dict[str, Any]:
    async with target.client() as client:
        for _ in range(3):  # warm: templates, caches, connections
            await target.load(client)
        cpu0 = serving.cpu_seconds(target.pid)
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            await target.load(client)
            times.append((time.perf_counter() - t0) * 1000)
        cpu = serving.cpu_seconds(target.pid) - cpu0
    return {"p50": pct(times, 50), "p99": pct(times, 99), "cpu_ms": 1000 * cpu / requests}


async def loaded(target: Target, users: int, seconds: float) -> dict[str, Any]:
    times: list[float] = []
    clients = [target.client() for _ in range(users)]
    for client in clients:
        await target.load(client)  # each user's connection open before the clock starts
    stop = time.perf_counter() + seconds

    async def user(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await target.load(client)
            times.append((time.perf_counter() - t0) * 1000)

    cpu0, t0 = serving.cpu_seconds(target.pid), time.perf_counter()
    await asyncio.gather(*(user(client) for client in clients))
    elapsed, cpu = time.perf_counter() - t0, serving.cpu_seconds(target.pid) - cpu0
    for client in clients:
        await client.aclose()
    return {
        "per_s": len(times) / elapsed,
        "p50": pct(times, 50),
        "p99": pct(times, 99),
        "cpu_ms": 1000 * cpu / len(times),
    }


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n== The first page of {args.tasks:,} tasks ({ROWS} rows), {args.rounds} interleaved rounds ==")
    print(f"load average {serving.load()}; {args.users} users for {args.seconds:g} s under load")
    print(
        "| round | server | alone p50 / p99 ms | CPU ms/page "
        f"| {args.users} users: pages/s | p50 / p99 ms | CPU ms/page |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        a, b = row["alone"], row["loaded"]
        print(
            f"| {row['round']} | {row['target']} | {a['p50']:.1f} / {a['p99']:.1f} | {a['cpu_ms']:.1f} "
            f"| {b['per_s']:.1f} | {b['p50']:.0f} / {b['p99']:.0f} | {b['cpu_ms']:.1f} |"
        )
    print(
        "\n| medians | alone p50 ms | x Flower (lower: better) | pages/s loaded | x Flower (higher: better) |"
    )
    print("|---|---:|---:|---:|---:|")

    def median(target: str, part: str, key: str) -> float:
        return float(statistics.median(row[part][key] for row in rows if row["target"] == target))

    flower_p50, flower_rate = median("Flower", "alone", "p50"), median("Flower", "loaded", "per_s")
    for target in dict.fromkeys(row["target"] for row in rows):
        p50, rate = median(target, "alone", "p50"), median(target, "loaded", "per_s")
        print(
            f"| {target} | {p50:.1f} | **{p50 / flower_p50:.2f}x** "
            f"| {rate:.1f} | **{rate / flower_rate:.2f}x** |"
        )


async def measure_all(targets: list[Target], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for round_ in range(1, args.rounds + 1):
        for target in targets:
            row = {"round": round_, "target": target.name}
            row["alone"] = await alone(target, args.requests)
            row["loaded"] = await loaded(target, args.users, args.seconds)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=14_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=50, help="sequential page loads alone")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from bench import export

    venv = flower_venv()
    scratch = Path(tempfile.mkdtemp(prefix="bench-flower-"))
    flower_db = scratch / "flower-state"
    flower_state(venv, flower_db, args.tasks)
    with serving.postgres_database("bench_flower") as database:
        env = serving.bench_env(
            DATABASE_URL=database, DASHBOARD_VAR_DIR=str(scratch), SECRET_KEY=secrets.token_urlsafe(48)
        )
        os.environ.update(env)
        os.environ["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
        passwords = export.populate(args.tasks)
        ours, theirs = serving.free_port(), serving.free_port()
        flower_argv = [str(venv / "bin" / "celery"), f"--broker={REDIS_URL}", "flower", f"--port={theirs}"]
        flower_argv += ["--address=127.0.0.1", "--persistent=True", f"--db={flower_db}"]
        flower_argv += [f"--max_tasks={args.tasks}", "--state_save_interval=0", "--logging=warning"]
        base, flower_base = f"http://127.0.0.1:{ours}", f"http://127.0.0.1:{theirs}"
        with (
            serving.server(serving.daphne("dashboard.asgi:application", ours), env, f"{base}/login/",
                           scratch / "daphne.log") as daphne_pid,
            serving.server(flower_argv, serving.bench_env(), f"{flower_base}/tasks",
                           scratch / "flower.log") as flower_pid,
        ):  # fmt: skip
            session = serving.login(base, "olga", passwords["olga"])
            targets = [
                Target("dashboard", daphne_pid, base, session.cookies, [("GET", "/tasks/")]),
                Target("Flower", flower_pid, flower_base, httpx.Cookies(),
                       [("GET", "/tasks"), ("POST", "/tasks/datatable")]),
                Target("Flower, datatable only", flower_pid, flower_base, httpx.Cookies(),
                       [("POST", "/tasks/datatable")]),
            ]  # fmt: skip
            rows = asyncio.run(measure_all(targets, args))
            session.close()
    report(rows, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
