"""UI benchmarks: the task list over 1,000 / 10,000 / 100,000 tasks, and live-update latency.

    .venv/bin/python bench/ui.py                      # both parts, SQLite
    .venv/bin/python bench/ui.py list [--sizes 1000,10000,100000] [--requests 20]
    .venv/bin/python bench/ui.py list --database-url postgres://postgres@127.0.0.1:5432/bench_ui
    .venv/bin/python bench/ui.py live [--tasks 3] [--n 30] [--delay 0.3]
    .venv/bin/python bench/ui.py loaded [--tasks 100000] [--open-requests 1000] [--users 20] [--seconds 10]

Prints numbers; asserts nothing (it is not a test). docs/benchmarks-ui.md has the results.

list: a fresh database (SQLite in a temp dir, or the PostgreSQL database named by --database-url,
    which must have 'bench' in its name and is dropped and created), migrated; one McpServer and
    RemoteTask rows in a realistic mix of statuses, each with its own encrypted taskId
    (task.set_remote_id: one Fernet encryption + one HMAC per row, timed apart from the inserts),
    and 1-4 TaskEvents each. The rows are added in stages (--sizes); at each stage Django's test
    Client (in-process, force_login as a superuser, no test instrumentation of templates) GETs
    each URL 2 times to warm up, then --requests times timed; one more request runs inside
    CaptureQueriesContext for the number of SQL queries and their summed time.

live: `manage.py demo` (Daphne, websockets, worker, reference MCP server: one process) on free
    ports with a fresh SQLite database; Chromium logs in and starts slow_count(n, delay) from the
    tool form, landing on the task's page. An init script puts a MutationObserver on the page
    that records when the text of `#task-card .status-message` changes (performance.timeOrigin +
    performance.now(), i.e. the machine's wall clock in ms with µs resolution) and an
    htmx:wsBeforeMessage listener that records when each websocket message arrived. Afterwards
    each DOM change is matched, by its statusMessage, to the TaskEvent the worker wrote for it:
    t_server = its remote_updated_at (the reference server's lastUpdatedAt, ISO with µs),
    t_worker = its observed_at (set inside the worker's transaction, before commit).

loaded: a fresh database with --tasks tasks (as `list` makes them, the newest recent) and
    --open-requests open elicitations; for /, /inbox/ and /tasks/: --alone requests by one user,
    then --users threads (each a logged-in Django test Client, no think time) for --seconds; the
    overview and inbox also as they were before issue 13 (bench/ui_baseline.py, mounted at
    /bench-baseline/), in the same process and run. "server ms/req loaded" is the run's time over
    the requests answered: the time each request holds the one process. Then the overview's live
    refresh for --viewers tabs over one interval, before (a render per tab) and today.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import math
import os
import pstats
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

URLS = [
    ("default (newest first)", "/tasks/"),
    ("status=completed", "/tasks/?status=completed"),
    ("status=needs_input", "/tasks/?status=needs_input"),
    ("q=backend (5% match)", "/tasks/?q=backend"),
    ("q=zzzz (no match)", "/tasks/?q=zzzz"),
    ("sort=tool", "/tasks/?sort=tool"),
    ("page=1000", "/tasks/?page=1000"),
    # issue 12 #4: full-text search (FTS5 on SQLite, tsvector on PostgreSQL), filters and sorts
    ("search q=counted (~70%)", "/tasks/?q=counted"),
    ("search q=simulated failure", "/tasks/?q=simulated+failure"),
    ('search q="tick 7" -x', "/tasks/?q=%22tick+7%22+-zzzz"),
    ("filter tool~+dates+user", "/tasks/?tool=count&from=2026-01-02&to=2026-01-05&user=1"),
    ("sort=-duration", "/tasks/?sort=-duration"),
    ("sort=-changed", "/tasks/?sort=-changed"),
    ("search+sort=duration", "/tasks/?q=counted&sort=duration"),
    ("overview /", "/"),
    ("inbox", "/inbox/"),
]

# (share, tool, status, flags): a dashboard that has been used for a while.
MIX = [
    (0.62, "slow_count", "completed", {}),
    (0.06, "rich_result", "completed", {}),
    (0.05, "fail_tool", "completed", {"is_tool_error": True}),
    (0.05, "fail_rpc", "failed", {}),
    (0.05, "run_forever", "cancelled", {}),
    (0.05, "short_ttl", "working", {"expired": True}),
    (0.08, "slow_count", "working", {}),
    (0.02, "ask_form", "input_required", {}),
    (0.02, "run_forever", "working", {"cancel_requested": True}),
]
MESSAGES = {
    "rich_result": "Started.",
    "fail_tool": "The tool reported an error.",
    "fail_rpc": "Tool execution failed: Simulated backend failure",
    "run_forever": "tick 7",
    "short_ttl": "Waiting for the TTL to pass.",
    "ask_form": "Waiting for the contact form.",
}


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# --- part a: the task list over many rows ------------------------------------------------------


def _fresh_database(args: argparse.Namespace, scratch: Path) -> str | None:
    """Point the settings at a new database (SQLite in `scratch`, or the throw-away PostgreSQL
    database --database-url names, dropped and created again); returns the admin URL for PostgreSQL."""
    os.environ.pop("REDIS_URL", None)
    os.environ["DASHBOARD_VAR_DIR"] = str(scratch)
    os.environ["LOG_LEVEL"] = "WARNING"
    admin_url = None
    if args.database_url:
        parts = urlsplit(args.database_url)
        name = parts.path.lstrip("/")
        if "bench" not in name:
            raise SystemExit(f"--database-url must name a throw-away database ('bench' in it), not {name!r}")
        admin_url = urlunsplit(parts._replace(path="/postgres"))
        _pg(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
    return admin_url


def list_main(args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    admin_url = _fresh_database(args, scratch)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[1]
    print(f"database: {engine} ({settings.DATABASES['default']['NAME']}); Django {django.get_version()}")
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    try:
        call_command("migrate", verbosity=0, interactive=False)
        from tasksapp.models import McpServer

        server = McpServer.objects.create(
            name="bench", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True
        )
        user = User.objects.create_superuser("bench", password=secrets.token_urlsafe(12))
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)

        sizes = [int(s) for s in args.sizes.split(",")]
        results: dict[int, dict[str, dict[str, Any]]] = {}
        setup_rows = []
        have = 0
        rng = random.Random(42)
        for size in sizes:
            timings = grow(server, have, size, rng)
            setup_rows.append((size, timings))
            have = size
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # fresh statistics, as a long-lived database would have
            gc.collect()  # the setup's garbage must not be collected inside the timed requests
            gc.freeze()
            results[size] = measure(client, args.requests, args.warmup, args.sql_runs)
            print_stage(size, timings, results[size])
        print_summary(sizes, results, args.requests, engine)
        if args.explain:
            explain(client, engine)
        if args.profile:
            profile(client, args.profile)
    finally:
        from django.db import connections

        connections.close_all()
        if admin_url:
            _pg(
                admin_url,
                f'DROP DATABASE IF EXISTS "{urlsplit(args.database_url).path.lstrip("/")}" WITH (FORCE)',
            )
        shutil.rmtree(scratch, ignore_errors=True)


def populate_main(args: argparse.Namespace) -> None:
    """Fill the database named by the environment with finished tasks of a disabled server.

    The worker never claims them (their server is disabled), but every page that counts or lists
    tasks sees them: the overview's tiles and chart, the task list.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from tasksapp.models import McpServer

    call_command("migrate", verbosity=0, interactive=False)
    server = McpServer.objects.create(
        name="archive", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True, enabled=False
    )
    grow(server, 0, args.size, random.Random(7), base=datetime.now(UTC) - timedelta(seconds=10 * args.size))


def _pg(admin_url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def grow(
    server: Any, start: int, stop: int, rng: random.Random, base: datetime | None = None
) -> dict[str, float]:
    """Add RemoteTask rows start..stop-1 (and their events); returns the setup timings in seconds."""
    from django.db import transaction

    from tasksapp.models import RemoteTask, TaskEvent

    created_field = RemoteTask._meta.get_field("created_at")
    created_field.auto_now_add = False  # this process only: spread created_at over the past
    base = base or datetime(2026, 1, 1, tzinfo=UTC)
    weights = [share for share, *_ in MIX]
    timings = {"build": 0.0, "set_remote_id": 0.0, "insert_tasks": 0.0, "insert_events": 0.0}
    batch = 5000
    for lo in range(start, stop, batch):
        hi = min(stop, lo + batch)
        t0 = time.perf_counter()
        rows, plans = [], []
        for i in range(lo, hi):
            _, tool, status, flags = rng.choices(MIX, weights)[0]
            created = base + timedelta(seconds=10 * i)
            n = rng.randint(3, 60)
            if tool == "slow_count":
                done = n if status == "completed" else rng.randint(0, n - 1)
                message = f"counted {done}/{n}"
            else:
                message = MESSAGES[tool]
            terminal = status in ("completed", "failed", "cancelled")
            rows.append(
                RemoteTask(
                    server=server,
                    tool_name=tool,
                    arguments={"n": n, "delay": 0.5} if tool == "slow_count" else {"delay": 0.3},
                    status=status,
                    status_message=message,
                    remote_created_at=created,
                    remote_updated_at=created + timedelta(seconds=n / 2),
                    created_at_raw=created.isoformat(),
                    updated_at_raw=(created + timedelta(seconds=n / 2)).isoformat(),
                    ttl_ms=900000,
                    poll_interval_ms=500,
                    result={"content": [{"type": "text", "text": message}], "isError": False}
                    if terminal
                    else None,
                    error={"code": -32603, "message": "Simulated backend failure"}
                    if status == "failed"
                    else None,
                    is_tool_error=flags.get("is_tool_error", False),
                    raw={"status": status, "statusMessage": message},
                    created_at=created,
                    finished_at=created + timedelta(seconds=n / 2) if terminal else None,
                    expired=flags.get("expired", False),
                    expired_at=created + timedelta(minutes=15) if flags.get("expired") else None,
                    cancel_requested_at=created + timedelta(seconds=3)
                    if flags.get("cancel_requested")
                    else None,
                    last_seen_at=created + timedelta(seconds=n / 2),
                    last_seen_via="push",
                )
            )
            plans.append((status, message, n, created))
        t1 = time.perf_counter()
        for task in rows:
            task.set_remote_id(secrets.token_urlsafe(32))
        t2 = time.perf_counter()
        with transaction.atomic():
            RemoteTask.objects.bulk_create(rows, batch_size=1000)
        t3 = time.perf_counter()
        events = []
        for task, (status, message, n, created) in zip(rows, plans, strict=True):
            first = f"counted 0/{n}" if task.tool_name == "slow_count" else "Started."
            events.append(
                TaskEvent(
                    task=task,
                    status="working",
                    status_message=first,
                    source="create",
                    remote_updated_at=created.isoformat(),
                    observed_at=created,
                )
            )
            for k in range(rng.randint(0, 2)):
                at = created + timedelta(seconds=k + 1)
                events.append(
                    TaskEvent(
                        task=task,
                        status="working",
                        status_message=f"step {k + 1}",
                        source="push",
                        remote_updated_at=at.isoformat(),
                        observed_at=at,
                    )
                )
            if status != "working":
                at = created + timedelta(seconds=n / 2)
                events.append(
                    TaskEvent(
                        task=task,
                        status=status,
                        status_message=message,
                        source="push",
                        remote_updated_at=at.isoformat(),
                        observed_at=at,
                    )
                )
        with transaction.atomic():
            TaskEvent.objects.bulk_create(events, batch_size=2000)
        t4 = time.perf_counter()
        timings["build"] += t1 - t0
        timings["set_remote_id"] += t2 - t1
        timings["insert_tasks"] += t3 - t2
        timings["insert_events"] += t4 - t3
    created_field.auto_now_add = True
    return timings


class QueryTimer:
    """A connection.execute_wrapper: each query's own time, with perf_counter (Django's log rounds to ms)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.calls.append(((time.perf_counter() - t0) * 1000, sql))


def measure(client: Any, requests: int, warmup: int = 2, timed_sql: int = 5) -> dict[str, dict[str, Any]]:
    """Round-robin over the URLs (so a noisy neighbour spreads over all of them): wall and CPU time;
    then `timed_sql` more requests per URL with every query timed."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    wall: dict[str, list[float]] = {label: [] for label, _ in URLS}
    cpu: dict[str, list[float]] = {label: [] for label, _ in URLS}
    for _label, url in URLS:
        for _ in range(warmup):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
    for _ in range(requests):
        for label, url in URLS:
            c0, t0 = time.process_time(), time.perf_counter()
            response = client.get(url)
            wall[label].append((time.perf_counter() - t0) * 1000)
            cpu[label].append((time.process_time() - c0) * 1000)
            assert response.status_code == 200
    out = {}
    for label, url in URLS:
        sql_runs = []
        for _ in range(max(1, timed_sql)):
            timer = QueryTimer()
            with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timer):
                response = client.get(url)
            sql_runs.append(sum(ms for ms, _ in timer.calls))
        slowest_ms, slowest_sql = max(
            (ms, query["sql"]) for (ms, _), query in zip(timer.calls, captured.captured_queries, strict=True)
        )
        out[label] = {
            "url": url,
            "median": statistics.median(wall[label]),
            "p95": pct(wall[label], 95),
            "p99": pct(wall[label], 99),
            "cpu": statistics.median(cpu[label]),
            "queries": len(captured.captured_queries),
            "sql_ms": statistics.median(sql_runs),
            "slowest_ms": slowest_ms,
            "slowest_sql": slowest_sql,
            "bytes": len(response.content),
            "page": _page_of(response),
        }
    return out


def _page_of(response: Any) -> str:
    text = response.content.decode()
    start = text.find('<span class="muted">page ')
    return text[start + 20 : text.find("</span>", start)].strip() if start >= 0 else ""


def print_stage(size: int, timings: dict[str, float], rows: dict[str, dict[str, Any]]) -> None:
    print(f"\n== {size:,} tasks ==")
    print(
        "setup of the rows added for this stage: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    )
    print(f"load average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'request':<28} {'median ms':>10} {'p95 ms':>8} {'p99 ms':>8} {'CPU ms':>7} {'queries':>8}"
        f" {'SQL ms':>7} {'slowest q':>10} {'KiB':>5}  page"
    )
    for label, row in rows.items():
        print(
            f"{label:<28} {row['median']:>10.1f} {row['p95']:>8.1f} {row['p99']:>8.1f} {row['cpu']:>7.1f} "
            f"{row['queries']:>8} "
            f"{row['sql_ms']:>7.1f} {row['slowest_ms']:>10.1f} {row['bytes'] / 1024:>5.0f}  {row['page']}"
        )


def print_summary(
    sizes: list[int], results: dict[int, dict[str, dict[str, Any]]], n: int, engine: str
) -> None:
    print(f"\n== summary ({engine}; median / p99 ms of {n} requests; SQL queries per request) ==")
    head = f"{'request':<28}" + "".join(f" {f'{s:,} tasks':>26}" for s in sizes)
    print(head)
    for label, _ in URLS:
        cells = []
        for size in sizes:
            row = results[size][label]
            cells.append(f"{row['median']:.1f} / {row['p99']:.1f} ms, {row['queries']} q")
        print(f"{label:<28}" + "".join(f" {c:>26}" for c in cells))
    print("\nCPU time of the test process per request (median ms; SQLite's work included, PostgreSQL's not):")
    print(head)
    for label, _ in URLS:
        cells = [f"{results[size][label]['cpu']:.1f}" for size in sizes]
        print(f"{label:<28}" + "".join(f" {c:>26}" for c in cells))
    big = sizes[-1]
    print(f"\nslowest query per request at {big:,} tasks:")
    for label, _ in URLS:
        row = results[big][label]
        print(f"- {label}: {row['slowest_ms']:.1f} ms: {row['slowest_sql'][:300]}")


def explain(client: Any, engine: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tasksapp.lib import crypto
    from tasksapp.models import RemoteTask

    prefix = "EXPLAIN QUERY PLAN " if engine == "sqlite3" else "EXPLAIN "

    def plan(sql: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(prefix + sql)
            return " | ".join(" ".join(str(c) for c in row[-1:]) for row in cursor.fetchall())

    print("\nquery plans of each request's slowest query:")
    for label, url in URLS:
        timer = QueryTimer()
        with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timer):
            client.get(url)
        _, slowest = max(
            (ms, query["sql"]) for (ms, _), query in zip(timer.calls, captured.captured_queries, strict=True)
        )
        print(f"- {label}: {plan(slowest)}")
    # The list's first step for any ?q=: is the text an exact task id? (remote_id_hash lookup)
    lookup = RemoteTask.objects.filter(remote_id_hash=crypto.fingerprint("zzzz"))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        lookup.first()
        times.append((time.perf_counter() - t0) * 1000)
    with CaptureQueriesContext(connection) as captured:
        lookup.first()
    sql = captured.captured_queries[0]["sql"]
    print(f"- ?q= exact task-id lookup (.first(), a miss): {statistics.median(times):.1f} ms: {plan(sql)}")


def profile(client: Any, url: str, repeat: int = 10) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        client.get(url)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    print(f"\ncProfile of {repeat} x GET {url} (cumulative):")
    print("\n".join(text.getvalue().splitlines()[:70]))


# --- part c: pages under load (issue 13) ---------------------------------------------------------

LOADED_URLS = [  # (label, today's URL, the same page as before issue 13, or None where unchanged)
    ("overview /", "/", "/bench-baseline/"),
    ("inbox", "/inbox/", "/bench-baseline/inbox/"),
    ("task list", "/tasks/", None),
]
FORM_PARAMS = {
    "message": "Please fill in your contact details.",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "email": {"type": "string", "format": "email", "title": "E-mail"},
            "age": {"type": "integer", "minimum": 0, "title": "Age"},
            "plan": {"type": "string", "enum": ["free", "team", "enterprise"], "title": "Plan"},
            "newsletter": {"type": "boolean", "title": "Newsletter"},
        },
        "required": ["name", "email"],
    },
}


def loaded_main(args: argparse.Namespace) -> None:
    """--tasks tasks and --open-requests open input requests; each page alone, then under --users
    concurrent users (threads with their own logged-in Client, no think time) for --seconds; today's
    views beside the views as they were before issue 13 (bench/ui_baseline.py), in the same run."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-ui-loaded-"))
    admin_url = _fresh_database(args, scratch)
    import django

    django.setup()
    import ui_baseline  # type: ignore[import-not-found]  # bench/ is on sys.path, not a package
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[1]
    print(
        f"database: {engine}; Django {django.get_version()}; {os.cpu_count()} cores; "
        f"python {sys.version.split()[0]}"
    )
    try:
        call_command("migrate", verbosity=0, interactive=False)
        from tasksapp.models import McpServer

        server = McpServer.objects.create(
            name="bench", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True
        )
        t0 = time.perf_counter()
        base = datetime.now(UTC) - timedelta(seconds=10 * args.tasks)  # the newest tasks are recent
        grow(server, 0, args.tasks, random.Random(42), base=base)
        opened = open_input_requests(args.open_requests)
        print(
            f"{args.tasks:,} tasks, {opened:,} open input requests "
            f"({time.perf_counter() - t0:.0f} s to set up)"
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        ui_baseline.mount()
        User.objects.create_superuser("bench", password=secrets.token_urlsafe(12))
        gc.collect()
        gc.freeze()
        rows = []
        for label, url, before in LOADED_URLS:
            if args.only and not any(label.startswith(word) for word in args.only.split(",")):
                continue
            for version, target in (("before", before), ("today", url)):
                if target is None:
                    continue
                alone = page_alone(target, args.alone)
                loaded = page_loaded(target, args.users, args.seconds)
                rows.append({"label": label, "version": version, "url": target, **alone, **loaded})
                print_loaded_row(rows[-1])
        live = live_refresh_cost(args.viewers)
        print_loaded(rows, live, args, engine)
    finally:
        from django.db import connections

        connections.close_all()
        if admin_url:
            _pg(
                admin_url,
                f'DROP DATABASE IF EXISTS "{urlsplit(args.database_url).path.lstrip("/")}" WITH (FORCE)',
            )
        shutil.rmtree(scratch, ignore_errors=True)


def open_input_requests(count: int) -> int:
    """One open elicitation (a five-field form) on each of `count` tasks that need input; their
    TTLs spread over the next hours so the inbox has an order to keep."""
    from datetime import UTC, datetime

    from tasksapp.models import InputRequest, RemoteTask

    now = datetime.now(UTC)
    tasks = list(RemoteTask.objects.filter(status="input_required", expired=False).order_by("id")[:count])
    rng = random.Random(3)
    for task in tasks:
        task.remote_created_at, task.ttl_ms = now, rng.randint(60, 6 * 3600) * 1000
    RemoteTask.objects.bulk_update(tasks, ["remote_created_at", "ttl_ms"], batch_size=1000)
    rows = []
    for task in tasks:
        row = InputRequest(task=task, method="elicitation/create", params=FORM_PARAMS)
        row.set_key(secrets.token_urlsafe(24))
        rows.append(row)
    InputRequest.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def _client() -> Any:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(User.objects.get(username="bench"))
    return client


def page_alone(url: str, requests: int) -> dict[str, Any]:
    """One user: median and p99 wall time, CPU per request, SQL queries, size of the page."""
    from django.db import connection, connections
    from django.test.utils import CaptureQueriesContext

    client = _client()
    for _ in range(2):
        assert client.get(url).status_code == 200, url
    wall, cpu = [], []
    for _ in range(requests):
        c0, t0 = time.process_time(), time.perf_counter()
        response = client.get(url)
        connections.close_all()  # as a server does after each request
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    return {
        "alone_p50": pct(wall, 50),
        "alone_p99": pct(wall, 99),
        "alone_cpu": statistics.median(cpu),
        "queries": len(captured.captured_queries),
        "bytes": len(response.content),
    }


def page_loaded(url: str, users: int, seconds: float) -> dict[str, Any]:
    """`users` threads, each a logged-in user requesting `url` again as soon as the last answer came,
    until `seconds` have passed (a request under way then finishes and counts)."""
    import threading

    from django.db import connections

    clients = [_client() for _ in range(users)]
    times: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Event()

    def user(client: Any) -> None:
        start.wait()
        try:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                response = client.get(url)
                # The test Client keeps its thread's connection; a server hands it back after each
                # request (to PostgreSQL's pool; SQLite reconnects per request, CONN_MAX_AGE 0).
                connections.close_all()
                took = (time.perf_counter() - t0) * 1000
                with lock:
                    if response.status_code == 200:
                        times.append(took)
                    else:
                        failures.append(str(response.status_code))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=user, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    c0, t0 = time.process_time(), time.perf_counter()
    stop = t0 + seconds
    start.set()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    done = len(times)
    return {
        "loaded_n": done,
        "loaded_p50": pct(times, 50) if times else float("nan"),
        "loaded_p99": pct(times, 99) if times else float("nan"),
        "per_s": done / elapsed,
        "busy_ms": 1000 * elapsed / max(done, 1),  # one process: the time each request holds it
        "loaded_cpu": 1000 * cpu / max(done, 1),
        "failures": len(failures),
    }


def live_refresh_cost(viewers: int) -> dict[str, float]:
    """The overview's live refresh for `viewers` open overview tabs, one interval: before issue 13 each
    tab's consumer rendered the partial itself; today tasksapp/live/pages.py renders it once per
    audience and shares it (OverviewPage._render, through tasksapp/live/shared.py)."""
    import ui_baseline
    from django.contrib.auth.models import User
    from django.template.loader import render_to_string
    from django.utils import timezone

    from tasksapp.live.pages import OverviewPage, audience
    from tasksapp.permissions import roles_of

    user = User.objects.get(username="bench")
    roles_of(user)

    def before() -> None:
        for _ in range(viewers):
            render_to_string(
                "tasksapp/overview.html#overview-live",
                {**ui_baseline.overview_context(), "oob": True, **roles_of(user)},
            )

    def today() -> None:  # one render for every tab of the audience
        OverviewPage(audience(user), timezone.now())._render()

    out = {}
    for name, run in (("before", before), ("today", today)):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
    t0 = time.perf_counter()
    OverviewPage(audience(user), timezone.now())._render()
    out["one_render"] = (time.perf_counter() - t0) * 1000
    return out


def print_loaded_row(row: dict[str, Any]) -> None:
    print(
        f"{row['label']:<11} {row['version']:<7} alone p50 {row['alone_p50']:8.1f} ms, "
        f"CPU {row['alone_cpu']:7.1f} ms,"
        f" {row['queries']:3d} q, {row['bytes'] / 1024:7.0f} KiB | {row['loaded_n']:5d} requests under load:"
        f" p50 {row['loaded_p50']:8.1f} p99 {row['loaded_p99']:8.1f} ms, {row['busy_ms']:7.1f} ms each,"
        f" {row['failures']} failed",
        flush=True,
    )


def print_loaded(
    rows: list[dict[str, Any]], live: dict[str, float], args: argparse.Namespace, engine: str
) -> None:
    print(
        f"\n== pages at {args.tasks:,} tasks and {args.open_requests:,} open requests ({engine}); alone: "
        f"{args.alone} requests; loaded: {args.users} concurrent users for {args.seconds:g} s =="
    )
    print(
        "| page | code | alone p50 ms | alone p99 ms | CPU ms/req | queries | KiB "
        "| loaded p50 ms | loaded p99 ms | server ms/req loaded | req/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['label']} | {r['version']} | {r['alone_p50']:.1f} | {r['alone_p99']:.1f} "
            f"| {r['alone_cpu']:.1f} "
            f"| {r['queries']} | {r['bytes'] / 1024:.0f} | {r['loaded_p50']:.0f} | {r['loaded_p99']:.0f} "
            f"| {r['busy_ms']:.1f} | {r['per_s']:.1f} |"
        )
    by = {(r["label"], r["version"]): r for r in rows}
    for label, _, before in LOADED_URLS:
        if before and (label, "before") in by:
            old, new = by[(label, "before")], by[(label, "today")]
            print(
                f"{label}: today / before = {new['alone_p50'] / old['alone_p50']:.3f} alone, "
                f"{new['busy_ms'] / old['busy_ms']:.3f} server time per request under load"
            )
    print(
        f"\nlive overview refresh, one interval, {args.viewers} overview tabs: "
        f"before {live['before']:.0f} ms "
        f"({args.viewers} renders), today {live['today']:.1f} ms (one render {live['one_render']:.1f} ms, "
        f"then {args.viewers - 1} cache hits); ratio {live['today'] / live['before']:.4f}"
    )


# --- part b: server change -> DOM --------------------------------------------------------------

OBSERVER_JS = """
(() => {
  const S = window.__lat = {dom: [], ws: [], last: null, wsCount: 0};
  const now = () => performance.timeOrigin + performance.now();
  const check = () => {
    const el = document.querySelector('#task-card .status-message');
    if (!el) return;
    const text = el.textContent.trim();
    if (text === S.last) return;
    S.last = text;
    const sample = {text, t: now(), wall: Date.now(), ws: S.wsCount, frame: null};
    S.dom.push(sample);
    requestAnimationFrame(() => { sample.frame = now(); });
  };
  new MutationObserver(check).observe(document, {childList: true, subtree: true, characterData: true});
  document.addEventListener('htmx:wsBeforeMessage', (e) => {
    S.wsCount++;
    const m = String(e.detail.message);
    const i = m.indexOf('class="status-message">');
    S.ws.push({t: now(), len: m.length, head: i >= 0 ? m.slice(i + 23, i + 223) : ''});
  });
})();
"""


def live_main(args: argparse.Namespace) -> None:
    import html

    from playwright.sync_api import expect

    # The sibling script, through the sys.path set above; mypy checks it as bench.screenshots.
    from screenshots import Demo, browser, login, run_from_form, wait_live  # type: ignore[import-not-found]

    demo = Demo()
    print(f"demo: {demo.url} (MCP :{demo.mcp_port}), database in {demo.var_dir}")
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; chromium {chromium_version()}")
    if args.background_tasks:
        t0 = time.perf_counter()
        argv = [sys.executable, __file__, "populate", "--size", str(args.background_tasks)]
        subprocess.run(argv, env=demo.env, cwd=ROOT, check=True, timeout=1800)
        took = time.perf_counter() - t0
        print(f"database pre-filled with {args.background_tasks:,} tasks of a disabled server ({took:.0f} s)")
    demo.start()
    samples: list[dict[str, Any]] = []
    missed = superseded = 0
    render_ms: dict[str, list[float]] = {}
    try:
        demo.setup_django()
        from django.db import close_old_connections

        from tasksapp.models import McpServer, TaskEvent

        server = McpServer.objects.get(name="reference")
        with browser() as chromium:
            context = chromium.new_context(viewport={"width": 1280, "height": 900})
            context.add_init_script(OBSERVER_JS)
            page = context.new_page()
            page.set_default_timeout(30000)
            login(page, demo)
            watchers = []
            for url in ["/"] * args.overview_tabs + ["/tasks/"] * args.list_tabs:
                watcher = context.new_page()
                watcher.goto(demo.url + url)
                wait_live(watcher)
                watchers.append(watcher)
            page.bring_to_front()  # the measured page is the visible one (frame callbacks run)
            if watchers:
                print(f"also open, live: {args.overview_tabs} overview tab(s), {args.list_tabs} list tab(s)")
            for _ in range(args.tasks):
                pk = run_from_form(
                    page, demo, server.pk, "slow_count", {"n": str(args.n), "delay": str(args.delay)}
                )
                wait_live(page)
                expect(page.locator("#task-card .status-message")).to_have_text(
                    f"counted {args.n}/{args.n}", timeout=int((args.n * args.delay + 30) * 1000)
                )  # not wait_for_function: its polling evaluates a string, which the CSP forbids
                page.wait_for_timeout(300)  # the last frame callbacks
                data = page.evaluate("window.__lat")
                close_old_connections()
                events = list(TaskEvent.objects.filter(task_id=pk).order_by("observed_at", "id"))
                by_message: dict[str, Any] = {}
                for stored in events:
                    by_message.setdefault(stored.status_message, stored)
                ws_first: dict[str, float] = {}
                for message in data["ws"]:
                    head = message["head"]
                    text = html.unescape(head[: head.find("</p>")]).strip() if "</p>" in head else ""
                    ws_first.setdefault(text, message["t"])
                shown = set()
                for dom in data["dom"]:
                    if dom["ws"] == 0:  # rendered with the page, not pushed: shown, but no latency sample
                        shown.add(dom["text"])
                        continue
                    event = by_message.get(dom["text"])
                    if event is None or not event.remote_updated_at:
                        continue
                    shown.add(dom["text"])
                    t_server = datetime.fromisoformat(event.remote_updated_at).timestamp() * 1000
                    t_worker = event.observed_at.timestamp() * 1000
                    t_ws = ws_first.get(dom["text"])
                    samples.append(
                        {
                            "task": pk,
                            "text": dom["text"],
                            "source": event.source,
                            "total": dom["t"] - t_server,
                            "server_to_worker": t_worker - t_server,
                            "worker_to_ws": (t_ws - t_worker) if t_ws else None,
                            "ws_to_dom": (dom["t"] - t_ws) if t_ws else None,
                            "to_frame": (dom["frame"] - t_server) if dom.get("frame") else None,
                            "clock_check": dom["wall"] - dom["t"],
                        }
                    )
                counted = [
                    e for e in events if e.status_message.startswith("counted ") and e.source != "create"
                ]
                # A change the page moved past (a later one shown) was superseded, not lost: the
                # timeline folds message-only changes within MCP_TIMELINE_COALESCE_MS into one event
                # (its row keeps the last message) and a socket sends the newest state once per
                # coalescing tick. Lost: a change the page never showed, nor anything after it.
                unseen = [e.status_message for e in counted if e.status_message not in shown]
                lost = [
                    e.status_message
                    for i, e in enumerate(counted)
                    if e.status_message not in shown
                    and not any(later.status_message in shown for later in counted[i + 1 :])
                ]
                missed += len(lost)
                superseded += len(unseen) - len(lost)
                sources = {s: sum(1 for e in counted if e.source == s) for s in ("poll", "push")}
                print(
                    f"task #{pk}: {len(counted)} changes in the mirror ({sources}); "
                    f"{len(counted) - len(unseen)} seen in the DOM (with the page or via the websocket); "
                    f"superseded before shown: {len(unseen) - len(lost)}; "
                    f"never shown: {lost[:6]}{'…' if len(lost) > 6 else ''}"
                )
            context.close()
            render_ms = consumer_render_cost(pk, args.render_repeat)
    finally:
        clean = demo.stop()
        print(f"demo stopped with SIGINT: {'cleanly' if clean else 'NOT cleanly'} ({demo.stop_note})")
        if not clean:
            print("".join(demo.output[-150:]))
        shutil.rmtree(demo.var_dir, ignore_errors=True)
    print_live(samples, missed, render_ms, args)
    print(f"changes the page moved past before showing them (coalesced): {superseded}")


def chromium_version() -> str:
    try:
        out = subprocess.run(
            ["/usr/bin/chromium", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.split()[1] if len(out.split()) > 1 else "?"


def consumer_render_cost(pk: int, repeat: int = 20) -> dict[str, list[float]]:
    """What LiveConsumer._render_task costs per task.changed, for a task page and an overview page."""
    from django.contrib.auth.models import User
    from django.template.loader import render_to_string
    from django.utils import timezone

    from tasksapp.live.pages import OverviewPage, audience
    from tasksapp.models import RemoteTask
    from tasksapp.permissions import roles_of
    from tasksapp.presenters.overview import overview_context
    from tasksapp.presenters.task import task_context

    user = User.objects.get(username="demo")

    def task_card() -> str:  # the section a task page's socket is sent on a status change
        task = RemoteTask.objects.for_detail().get(pk=pk)
        context = {**task_context(task, user), **roles_of(user), "oob": True}
        return render_to_string("tasksapp/task_detail.html#task-card", context)

    def per_tab() -> str:  # what main rendered per overview tab and change burst
        context = {**overview_context(), "oob": True, **roles_of(user)}
        return render_to_string("tasksapp/overview.html#overview-live", context)

    def shared() -> str:  # the one render a change burst pays for every tab of the audience
        return OverviewPage(audience(user), timezone.now())._render()

    # "overview": what the consumer renders per overview tab (on main, per tab and change burst);
    # "overview shared": OverviewPage._render, rendered once per burst for all tabs of an audience.
    renders = {
        "task": task_card,
        "overview": per_tab,
        "overview shared": shared,
    }
    out = {}
    for name, render in renders.items():
        assert render(), name  # a render that returns nothing would time nothing
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            render()
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = times
    return out


def print_live(
    samples: list[dict[str, Any]], missed: int, render_ms: dict[str, list[float]], args: argparse.Namespace
) -> None:
    def row(label: str, values: list[float]) -> str:
        if not values:
            return f"{label:<44} {'-':>6}"
        return (
            f"{label:<44} {len(values):>6} {pct(values, 50):>8.1f} {pct(values, 95):>8.1f} "
            f"{max(values):>8.1f} {min(values):>8.1f}"
        )

    extra = ""
    if args.background_tasks or args.overview_tabs or args.list_tabs:
        extra = (
            f"; {args.background_tasks:,} other tasks in the database, {args.overview_tabs} overview"
            f" + {args.list_tabs} task-list tabs open"
        )
    print(
        f"\n== server statusMessage change -> DOM (slow_count n={args.n}, delay={args.delay}{extra}; ms) =="
    )
    print(f"{'':<44} {'n':>6} {'p50':>8} {'p95':>8} {'max':>8} {'min':>8}")
    pushed = [s for s in samples if s["source"] == "push"]
    polled = [s for s in samples if s["source"] == "poll"]
    print(row("all samples: lastUpdatedAt -> DOM", [s["total"] for s in samples]))
    print(row("  mirrored by push", [s["total"] for s in pushed]))
    print(row("  mirrored by poll (before the stream)", [s["total"] for s in polled]))
    print(row("push: lastUpdatedAt -> worker event row", [s["server_to_worker"] for s in pushed]))
    print(
        row(
            "push: worker event row -> ws message in page",
            [s["worker_to_ws"] for s in pushed if s["worker_to_ws"] is not None],
        )
    )
    print(
        row(
            "push: ws message -> DOM mutation", [s["ws_to_dom"] for s in pushed if s["ws_to_dom"] is not None]
        )
    )
    print(
        row(
            "push: lastUpdatedAt -> next animation frame",
            [s["to_frame"] for s in pushed if s["to_frame"] is not None],
        )
    )
    print(row("consumer render, task page (4 partials)", render_ms.get("task", [])))
    print(row("consumer render, overview page (per tab)", render_ms.get("overview", [])))
    print(row("OverviewPage render, one per burst", render_ms.get("overview shared", [])))
    print(f"changes the mirror recorded but the DOM never showed (nor a later one): {missed}")
    clock = [abs(s["clock_check"]) for s in samples]
    if clock:
        print(f"page clock check: |Date.now() - (timeOrigin + performance.now())| max {max(clock):.1f} ms")
    total = [s["total"] for s in samples]
    if total:
        verdict = "PASS" if pct(total, 50) < 100 else "FAIL"
        print(f"target p50 < 100 ms (all samples): {verdict} (p50 {pct(total, 50):.1f} ms)")
    if pushed:
        p = pct([s["total"] for s in pushed], 50)
        print(f"target p50 < 100 ms (push samples): {'PASS' if p < 100 else 'FAIL'} (p50 {p:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="part")
    lp = sub.add_parser("list", help="the task list over many rows")
    lp.add_argument("--sizes", default="1000,10000,100000")
    lp.add_argument("--requests", type=int, default=20)
    lp.add_argument("--warmup", type=int, default=2, help="untimed requests per URL first")
    lp.add_argument("--sql-runs", type=int, default=5, help="requests per URL with every query timed")
    lp.add_argument("--database-url", help="a throw-away PostgreSQL database ('bench' in its name)")
    lp.add_argument("--explain", action="store_true", help="print the plan of each request's slowest query")
    lp.add_argument("--profile", metavar="URL", help="cProfile 10 GETs of URL at the last size")
    lv = sub.add_parser("live", help="server change -> DOM latency in Chromium")
    lv.add_argument("--tasks", type=int, default=3)
    lv.add_argument("--n", type=int, default=30)
    lv.add_argument("--delay", type=float, default=0.3)
    lv.add_argument("--background-tasks", type=int, default=0, help="pre-fill the demo's database")
    lv.add_argument("--overview-tabs", type=int, default=0, help="overview pages kept open meanwhile")
    lv.add_argument("--list-tabs", type=int, default=0, help="task-list pages kept open meanwhile")
    lv.add_argument("--render-repeat", type=int, default=20, help="timed consumer renders of each kind")
    ld = sub.add_parser(
        "loaded", help="/, /inbox/, /tasks/ alone and under concurrent users, before and today"
    )
    ld.add_argument("--tasks", type=int, default=100_000)
    ld.add_argument("--open-requests", type=int, default=1000)
    ld.add_argument("--users", type=int, default=20)
    ld.add_argument("--seconds", type=float, default=10)
    ld.add_argument("--alone", type=int, default=20, help="requests per page by one user")
    ld.add_argument("--viewers", type=int, default=100, help="overview tabs for the live-refresh cost")
    ld.add_argument("--database-url", help="a throw-away PostgreSQL database ('bench' in its name)")
    ld.add_argument("--only", default="", help="pages whose label starts so, e.g. 'inbox' or 'overview,task'")
    pp = sub.add_parser("populate", help="(internal) fill the database of the environment for `live`")
    pp.add_argument("--size", type=int, required=True)
    args = parser.parse_args()
    if args.part == "populate":
        populate_main(args)
    elif args.part == "list":
        list_main(args)
    elif args.part == "live":
        live_main(args)
    elif args.part == "loaded":
        loaded_main(args)
    else:  # both, each in its own process (each points Django at its own database)
        for part in ("list", "live"):
            subprocess.run([sys.executable, __file__, part], check=False, timeout=3600)


if __name__ == "__main__":
    main()
