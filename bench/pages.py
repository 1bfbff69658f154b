"""Pages near their SQL (issue 24 goal 2): each page's server time beside its own SQL replayed alone.

    flock /tmp/heavy.lock env PYTHONPATH=$PWD .venv/bin/python bench/pages.py \\
        [--tasks 100000] [--events 1000] [--open-requests 1000] [--rounds 10] \\
        [--database-url postgres://postgres@127.0.0.1:5432/bench_pages] [--json out.json]

A fresh PostgreSQL database (dropped and created; its name must contain 'bench') with --tasks tasks
as bench/ui.py makes them (the list's mix of statuses, the newest recent, 1-4 events each), one task
given --events more events, and --open-requests open elicitations (bench/ui.py loaded's inbox).
Then, --rounds times, for each page in turn (interleaved: page, its SQL, the next page, ...):

- server time: one GET through Django's test Client (in-process: every middleware, the view, the
  templates; no HTTP server), logged in as a superuser, the connection handed back to the pool
  afterwards as a server does; wall time, with every query it ran recorded (SQL and parameters);
- its SQL alone: the same statements with the same parameters, replayed straight on the
  connection's psycopg cursor (no ORM, no template) and every row fetched, inside one transaction
  that is rolled back (so a page that writes, e.g. a session, changes nothing twice).

Printed per page: median server time, median SQL-alone time, their ratio (goal: <= 2), the median
of the per-round ratios, the time the page's own queries took inside it, query count and size, and
the statements it repeats (a query per row shows here). Last, the query counts of the pages that
list servers again after --extra-servers more servers are added: constant, or one query per server.
The machine is shared: the load average is printed beside the figures; read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import ui  # noqa: E402  (the rows: ui.grow, ui.open_input_requests)

PAGES = [  # (label, URL; {task} is the task with --events events)
    ("overview /", "/"),
    ("task list /tasks/", "/tasks/"),
    ("task page, {events} events", "/tasks/{task}/"),
    ("search q=counted", "/tasks/?q=counted"),
    ("search q=simulated failure", "/tasks/?q=simulated+failure"),
    ("inbox, {requests} open", "/inbox/"),
    ("/metrics", "/metrics"),
]
SERVER_PAGES = [("overview /", "/"), ("servers /servers/", "/servers/")]


class Recorder:
    """A connection.execute_wrapper: every statement a request runs, with its parameters and time."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool, float]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.calls.append((sql, params, many, time.perf_counter() - started))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def setup(args: argparse.Namespace) -> dict[str, str]:
    """The rows; returns the labels and URLs of the pages, with the busy task's id filled in."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from tasksapp.models import McpServer, RemoteTask, TaskEvent

    call_command("migrate", verbosity=0, interactive=False)
    server = McpServer.objects.create(
        name="bench", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True
    )
    started = time.perf_counter()
    base = datetime.now(UTC) - timedelta(seconds=10 * args.tasks)  # the newest tasks are recent
    ui.grow(server, 0, args.tasks, random.Random(42), base=base)
    opened = ui.open_input_requests(args.open_requests)
    busy = RemoteTask.objects.order_by("-created_at", "-id").first()
    assert busy is not None
    now = datetime.now(UTC)
    TaskEvent.objects.bulk_create(
        [
            TaskEvent(
                task=busy,
                status="working",
                status_message=f"step {i}",
                source="push",
                observed_at=now - timedelta(seconds=args.events - i),
            )
            for i in range(args.events)
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    User.objects.create_superuser("bench", password=secrets.token_urlsafe(12))
    print(
        f"{args.tasks:,} tasks, task #{busy.pk} with {busy.events.count():,} events, {opened:,} open input "
        f"requests ({time.perf_counter() - started:.0f} s to set up)",
        flush=True,
    )
    names = {"events": f"{busy.events.count():,}", "requests": f"{opened:,}", "task": str(busy.pk)}
    return {label.format(**names): url.format(**names) for label, url in PAGES}


def served(client: Any, url: str) -> tuple[float, Recorder, int]:
    """One GET: wall seconds, what it ran, the body's size."""
    from django.db import connection, connections

    recorder = Recorder()
    started = time.perf_counter()
    with connection.execute_wrapper(recorder):
        response = client.get(url)
        size = len(response.content)
    connections.close_all()  # back to the pool, as a server does after each request
    took = time.perf_counter() - started
    assert response.status_code == 200, (url, response.status_code)
    return took, recorder, size


def replayed(calls: list[tuple[str, Any, bool, float]]) -> float:
    """The statements alone on the raw psycopg cursor, every row fetched; rolled back."""
    from django.db import connection, connections, transaction

    connection.ensure_connection()  # a connection from the pool, before the clock starts
    took = 0.0
    with transaction.atomic():
        with connection.cursor() as wrapper:
            raw = wrapper.cursor
            for sql, params, many, _ in calls:
                started = time.perf_counter()
                if many:
                    raw.executemany(sql, params)
                else:
                    raw.execute(sql, params)
                    if raw.description is not None:
                        raw.fetchall()
                took += time.perf_counter() - started
        transaction.set_rollback(True)
    connections.close_all()
    return took


def repeated(calls: list[tuple[str, Any, bool, float]]) -> list[tuple[int, str]]:
    shapes = Counter(sql for sql, *_ in calls)
    return [(n, sql) for sql, n in shapes.most_common() if n > 1]


def measure(pages: dict[str, str], rounds: int) -> dict[str, dict[str, Any]]:
    client = ui._client()
    for url in pages.values():  # warm: templates compiled, caches filled, plans cached by PostgreSQL
        served(client, url)
        replayed(served(client, url)[1].calls)
    rows: dict[str, dict[str, Any]] = {
        label: {"url": url, "page": [], "sql": [], "inside": []} for label, url in pages.items()
    }
    for _ in range(rounds):
        for label, url in pages.items():
            took, recorder, size = served(client, url)
            row = rows[label]
            row["page"].append(took)
            row["inside"].append(sum(call[3] for call in recorder.calls))
            row["sql"].append(replayed(recorder.calls))
            row["queries"], row["bytes"], row["repeated"] = (
                len(recorder.calls),
                size,
                repeated(recorder.calls),
            )
    return rows


def server_growth(extra: int) -> list[dict[str, Any]]:
    """Query counts of the pages listing servers, before and after `extra` more servers."""
    from tasksapp.models import McpServer

    def counts() -> dict[str, int]:
        client = ui._client()
        return {label: len(served(client, url)[1].calls) for label, url in SERVER_PAGES}

    before, servers = counts(), McpServer.objects.count()
    McpServer.objects.bulk_create(
        [
            McpServer(name=f"extra-{i}", url=f"http://127.0.0.1:9/extra-{i}", era="modern")
            for i in range(extra)
        ]
    )
    after = counts()
    return [
        {"page": label, "servers": servers, "queries": before[label], "servers_after": servers + extra,
         "queries_after": after[label]}
        for label, _ in SERVER_PAGES
    ]  # fmt: skip


def report(rows: dict[str, dict[str, Any]], growth: list[dict[str, Any]], args: argparse.Namespace) -> None:
    ms = 1000
    print(
        f"\n== pages at {args.tasks:,} tasks (PostgreSQL), {args.rounds} interleaved rounds; "
        f"load average {load()} ==\n"
    )
    print(
        "| page | server ms (median) | its SQL alone ms | ratio | per-round ratio (median) "
        "| SQL inside the page ms | queries | KiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, row in rows.items():
        page, sql = statistics.median(row["page"]), statistics.median(row["sql"])
        per_round = statistics.median(p / s for p, s in zip(row["page"], row["sql"], strict=True) if s > 0)
        row.update(page_ms=page * ms, sql_ms=sql * ms, ratio=page / sql, round_ratio=per_round)
        print(
            f"| {label} | {page * ms:.1f} | {sql * ms:.1f} | **{page / sql:.2f}x** | {per_round:.2f}x "
            f"| {statistics.median(row['inside']) * ms:.1f} | {row['queries']} | {row['bytes'] / 1024:.0f} |"
        )
    print("\nstatements a page runs more than once (the same SQL, its parameters may differ):")
    for label, row in rows.items():
        for n, sql in row["repeated"]:
            print(f"- {label}: {n}x {sql[:160]}")
    print("\nqueries of the pages that list servers:")
    for item in growth:
        verdict = "constant" if item["queries_after"] == item["queries"] else "grows with servers"
        print(
            f"- {item['page']}: {item['queries']} queries at {item['servers']} server(s), "
            f"{item['queries_after']} at {item['servers_after']}: {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1000, help="events of the task page measured")
    parser.add_argument("--open-requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--extra-servers", type=int, default=99, help="added for the query-count check")
    parser.add_argument(
        "--database-url",
        default="postgres://postgres@127.0.0.1:5432/bench_pages",
        help="a throw-away PostgreSQL database ('bench' in its name)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        parser.error("--database-url must be a PostgreSQL URL")
    scratch = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    admin_url = ui._fresh_database(args, scratch)
    import django

    django.setup()
    print(f"Django {django.get_version()}; {os.cpu_count()} cores; load average {load()}", flush=True)
    try:
        pages = setup(args)
        rows = measure(pages, args.rounds)
        growth = server_growth(args.extra_servers)
        report(rows, growth, args)
        if args.json:
            args.json.write_text(
                json.dumps({"pages": rows, "servers": growth, "load": load()}, default=str, indent=1)
            )
    finally:
        from django.db import connections

        connections.close_all()
        if admin_url:
            name = urlsplit(args.database_url).path.lstrip("/")
            ui._pg(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
