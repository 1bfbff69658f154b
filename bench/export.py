"""Exports stream? (issue 24 goal 3): the task list's CSV export at 100,000 tasks under Daphne, beside
a bare server-side cursor + csv.writer served by the same Daphne, in one run.

    flock /tmp/heavy.lock env PYTHONPATH=$PWD .venv/bin/python bench/export.py [--tasks 100000] [--rounds 3]

A fresh PostgreSQL database with --tasks tasks (bench/ui.py's mix, 1-4 events each), an operator
(who may act on tasks, so the export decrypts every task id) and a viewer (no task ids). Then
--rounds rounds, each of three runs in this order (interleaved), each on a fresh Daphne process:

- product, operator: GET /tasks/export.csv with the operator's session (logged in through the form);
- product, viewer: the same as the viewer;
- bare: GET /tasks.csv from bench/export_bare.py (the same SELECT, joins and order through a
  psycopg server-side cursor, 2,000 rows a fetch, csv.writer, 64 KiB chunks; no task id).

For each: the time to the first byte of the body and to the last (httpx streaming, from the request
being sent), the bytes and lines received, and Daphne's resident memory (VmRSS, sampled every 20 ms
from /proc) before the request, at its peak, and 1 s after the download ended, and Daphne's CPU
seconds over the download. The goals: first byte within 1 s, memory flat, total <= 1.5x bare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import serving, ui  # noqa: E402

MODES = ("product, operator", "product, viewer", "bare")


def populate(tasks: int) -> dict[str, str]:
    """Rows and people in the database DATABASE_URL names; returns the people's passwords."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection, connections

    from tasksapp.models import McpServer

    call_command("migrate", verbosity=0, interactive=False)
    server = McpServer.objects.create(
        name="bench", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True
    )
    started = time.perf_counter()
    ui.grow(server, 0, tasks, random.Random(42), base=datetime.now(UTC) - timedelta(seconds=10 * tasks))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    passwords = {"olga": secrets.token_urlsafe(12), "vera": secrets.token_urlsafe(12)}
    for name, role in (("olga", "operator"), ("vera", "viewer")):
        user = User.objects.create_user(name, password=passwords[name])
        user.groups.add(Group.objects.get(name=role))
    connections.close_all()
    print(f"{tasks:,} tasks ({time.perf_counter() - started:.0f} s to set up); load average {serving.load()}")
    return passwords


class Sampler(threading.Thread):
    """VmRSS of one process every 20 ms until stopped; the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, serving.rss_mib(pid), threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, serving.rss_mib(self.pid))


def download(client: httpx.Client, url: str, pid: int) -> dict[str, Any]:
    before, cpu0 = serving.rss_mib(pid), serving.cpu_seconds(pid)
    sampler = Sampler(pid)
    sampler.start()
    first, size, lines = None, 0, 0
    started = time.perf_counter()
    with client.stream("GET", url, timeout=600) as response:
        assert response.status_code == 200, (url, response.status_code)
        for chunk in response.iter_raw():
            if first is None and chunk:
                first = time.perf_counter() - started
            size += len(chunk)
            lines += chunk.count(b"\n")
    total = time.perf_counter() - started
    cpu = serving.cpu_seconds(pid) - cpu0
    time.sleep(1)
    sampler.done.set()
    sampler.join()
    return {"first_byte_s": first, "total_s": total, "mib": size / 2**20, "lines": lines, "cpu_s": cpu,
            "rss_before": before, "rss_peak": sampler.peak, "rss_after": serving.rss_mib(pid)}  # fmt: skip


def one_run(mode: str, env: dict[str, str], passwords: dict[str, str], logs: Path) -> dict[str, Any]:
    port = serving.free_port()
    base = f"http://127.0.0.1:{port}"
    app = "bench.export_bare:application" if mode == "bare" else "dashboard.asgi:application"
    log = logs / f"daphne-{mode.replace(', ', '-')}.log"
    with serving.server(serving.daphne(app, port), env, f"{base}/login/", log) as pid:
        if mode == "bare":
            client, url = httpx.Client(base_url=base), "/tasks.csv"
            client.get("/")
        else:
            name = "olga" if mode.endswith("operator") else "vera"
            client, url = serving.login(base, name, passwords[name]), "/tasks/export.csv"
            client.get("/tasks/")  # the views and templates loaded, as in a server that has been up a while
        try:
            return {"mode": mode, **download(client, url, pid)}
        finally:
            client.close()


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n== CSV export of {args.tasks:,} tasks, {args.rounds} interleaved rounds ==")
    print(f"load average {serving.load()}")
    print("| run | first byte s | total s | MiB | lines | Daphne CPU s | RSS before / peak / after MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        rss = f"{run['rss_before']:.0f} / {run['rss_peak']:.0f} / {run['rss_after']:.0f}"
        print(
            f"| {run['mode']} | {run['first_byte_s']:.2f} | {run['total_s']:.2f} | {run['mib']:.1f} "
            f"| {run['lines']:,} | {run['cpu_s']:.2f} | {rss} |"
        )
    print(
        "\n| medians | first byte s | total s | x bare (total) | RSS rise at peak MiB | RSS kept after MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    bare = statistics.median(run["total_s"] for run in runs if run["mode"] == "bare")
    for mode in MODES:
        mine = [run for run in runs if run["mode"] == mode]
        total = statistics.median(run["total_s"] for run in mine)
        first = statistics.median(run["first_byte_s"] for run in mine)
        rise = statistics.median(run["rss_peak"] - run["rss_before"] for run in mine)
        kept = statistics.median(run["rss_after"] - run["rss_before"] for run in mine)
        print(f"| {mode} | {first:.2f} | {total:.2f} | **{total / bare:.2f}x** | {rise:.0f} | {kept:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="bench-export-"))
    with serving.postgres_database("bench_export") as database:
        env = serving.bench_env(
            DATABASE_URL=database, DASHBOARD_VAR_DIR=str(logs), SECRET_KEY=secrets.token_urlsafe(48)
        )
        os.environ.update(env)
        os.environ["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
        passwords = populate(args.tasks)
        runs = []
        for round_ in range(args.rounds):
            for mode in MODES:
                runs.append(one_run(mode, env, passwords, logs))
                print(f"round {round_ + 1} {mode}: {json.dumps(runs[-1])}", flush=True)
    report(runs, args)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
