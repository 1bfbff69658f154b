"""Mirror lag under CPU saturation: server change -> mirror commit, and -> the page's notification.

    .venv/bin/python bench/lag.py [--tree /path/to/checkout] [--tasks 150] [--seconds 40] [--burners 2]
    .venv/bin/python bench/lag.py --tree /tmp/old-main --tree .     # before and after, side by side

For each --tree (a checkout of this project: the old commit in a `git worktree`, and this one), in
fresh processes from that tree: a new SQLite database, migrated; a private redis-server (the
channel layer, as in production); the reference server (python -m tasksapp.demoserver) with
--tasks run_forever tasks ticking every 2 s (poll interval 2 s, so a listen stream covers them
and they are polled every MCP_POLL_SAFETY_NET_MS, 30 s); --burners busy-loop processes (one per
core saturates the machine, as 20-50 users did in the drill); and `manage.py worker` from that
tree. For --seconds, this process listens on the channel layer's `tasks` group (a web process's
view: the message a page's socket acts on). Afterwards the TaskEvent rows give, per change:
server change (remote_updated_at, the server's lastUpdatedAt, same host so the clock is shared)
-> observed_at (the commit), and the path (source: push or poll); each task.changed message
received is matched to the newest change of that task committed before it: server change ->
the page's notification.

Timeline coalescing is off (MCP_TIMELINE_COALESCE_MS=0) so every change has its own row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.peers.launch import free_port  # noqa: E402

BURN = "while True: pass"


def quantiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    median = statistics.median(ordered)
    return f"p50 {median:6.2f} s  p99 {p99:6.2f} s  max {ordered[-1]:6.2f} s  (n={len(ordered)})"


def parse(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


async def listen(redis_url: str, seconds: float, arrivals: list[tuple[int, float]]) -> None:
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[redis_url])
    channel = await layer.new_channel()
    await layer.group_add("tasks", channel)
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await asyncio.wait_for(layer.receive(channel), left)
            except TimeoutError:
                break
            if message.get("type") == "task.changed":
                arrivals.append((int(message["id"]), time.time()))
    finally:
        await layer.group_discard("tasks", channel)


def run_tree(tree: Path, args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-lag-"))
    python = str(ROOT / ".venv/bin/python")
    redis_port, demo_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "REDIS_URL": redis_url,
        "MCP_TIMELINE_COALESCE_MS": "0",
        "PYTHONPATH": str(tree),
        "PYTHONUNBUFFERED": "1",
    }
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(argv: list[str], name: str) -> subprocess.Popen[bytes]:
        out = open(work / f"{name}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    try:
        spawn(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"], "redis")
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=tree, env=env, check=True)
        spawn([python, "-m", "tasksapp.demoserver", "--port", str(demo_port)], "demo")
        time.sleep(2)
        url = f"http://127.0.0.1:{demo_port}/mcp"
        setup = (
            "from tasksapp import services\n"
            f"s = services.server_create(name='demo', url={url!r}, headers={{}}, user=None)\n"
            f"for _ in range({args.tasks}):\n"
            "    services.call_start(server=s, tool='run_forever', user=None,\n"
            "                        arguments={'delay': 2, 'poll_interval_ms': 2000})\n"
        )
        subprocess.run([python, "manage.py", "shell", "-c", setup], cwd=tree, env=env, check=True)
        for _ in range(args.burners):
            spawn([python, "-c", BURN], "burn")
        spawn([python, "manage.py", "worker", "--name", "bench"], "worker")
        time.sleep(args.warmup)
        began = time.time()
        arrivals: list[tuple[int, float]] = []
        asyncio.run(listen(redis_url, args.seconds, arrivals))
        ended = time.time()
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

    db = sqlite3.connect(work / "db.sqlite3")
    rows = db.execute(
        "SELECT task_id, source, remote_updated_at, observed_at FROM tasksapp_taskevent ORDER BY observed_at"
    ).fetchall()
    mirror: list[float] = []
    by_path: dict[str, int] = {}
    changes: dict[int, list[tuple[float, float]]] = {}  # task -> [(committed, server change)]
    for task_id, source, remote, observed in rows:
        committed, changed = parse(observed), parse(remote)
        if committed is None or changed is None or not began <= committed <= ended:
            continue
        mirror.append(committed - changed)
        by_path[source] = by_path.get(source, 0) + 1
        changes.setdefault(task_id, []).append((committed, changed))
    page: list[float] = []
    for task_id, arrived in arrivals:
        before = [c for c in changes.get(task_id, []) if c[0] <= arrived + 0.001]
        if before:
            page.append(arrived - max(before)[1])
    total = sum(by_path.values()) or 1
    return {
        "tree": str(tree),
        "commit": subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "mirror": quantiles(mirror),
        "page": quantiles(page),
        "push_share": f"{100 * by_path.get('push', 0) / total:.0f} % push of {sum(by_path.values())} changes "
        f"({by_path}) in {args.seconds:.0f} s; expected about {args.tasks * args.seconds / 2:.0f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", type=Path, help="a checkout to run (repeatable)")
    parser.add_argument("--tasks", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    results = [run_tree(tree.resolve(), args) for tree in (args.tree or [ROOT])]
    load = f"{args.burners} busy-loop processes, {args.seconds:.0f} s"
    print(f"\n{args.tasks} tasks changing every 2 s, {load}")
    for result in results:
        print(f"\n{result['tree']} @ {result['commit']}")
        print(f"  server change -> mirror commit: {result['mirror']}")
        print(f"  server change -> page message:  {result['page']}")
        print(f"  {result['push_share']}")


if __name__ == "__main__":
    main()
