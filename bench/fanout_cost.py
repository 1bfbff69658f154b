"""Fan-out cost per frame (issue 24 goal 1): Daphne's CPU per websocket frame delivered, for the
product's task list and task page beside two baselines on the same Daphne + channels_redis.

    flock /tmp/heavy.lock nice -n 5 env PYTHONPATH=$PWD .venv/bin/python bench/fanout_cost.py \\
        [--tabs 50,100,250] [--modes all] [--seconds 10] [--rate 20] [--rounds 1] [--json out.json]

Set-up, once: a fresh PostgreSQL database ('bench' in its name; --database-url names one), migrated,
four users (two viewers, two operators: two audiences), one server row and --tasks working tasks
written through the service the worker uses (no MCP server, no worker process).

Then, for each N of --tabs and each round, every mode in turn, each on a fresh Daphne (on the Redis
channel layer, a Redis database index of the bench's own, --redis-db, emptied before each run):

- `bare-hub`: bench/fanout_bare.py's one subscription per process handing a pre-built frame to every
  socket in memory (the product's hub without rendering): the floor for this stack;
- `bare-group`: bench/fanout_bare.py's plain AsyncWebsocketConsumer per socket in the `tasks` group,
  sending the pre-built frame for each message;
- `list`: the product, N tabs on /tasks/ (every changed task is on its first page);
- `page`: the product, N tabs over the pages of 10 tasks.

One client process holds the N sockets, half of them viewers', half operators'. A product tab is
what a browser does: it GETs its page with the session cookie, reads `ws-connect` and the page's
`data-since`, and connects with the cookie and the page's Origin. Once every socket is open, a driver
process (this script's `drive` sub-command, Django set up on the same database and Redis) makes
--rate changes a second: for the product, a new status message for a task through the worker's own
write-and-publish path (tasksapp.engine.snapshots.apply_snapshots, which runs
services.task_apply_snapshot: the row, its timeline, `task.changed` published after commit), round
robin over the list's tasks or the 10 watched tasks; for the baselines, the same `task.changed`
message published through tasksapp.events, without the database write.

After --warm-up seconds the bench reads Daphne's user+system CPU (/proc/<pid>/stat) and every
socket's counts, and again --seconds later. Per run it prints:
- frames: text frames the sockets received in the window;
- updates: task changes those frames carried (a task-list frame carries every row changed since the
  socket's last flush: the product coalesces for LIVE_COALESCE_MS, 150 ms, so at 20 changes/s a list
  frame holds about 3 rows); a baseline's or a task page's frame is one update. Beside them, those
  expected: each change in the window times the sockets that show its task;
- late / never delivered: once the driver has stopped, the bench waits until no frame has come for
  a second: updates that came after the driver stopped were late (a backlog), and those of all the
  driven changes that never came were lost (a full channel drops silently; for the product, also two
  changes to one task that reached a socket within one coalescing period, which the driver avoids by
  never catching up in a burst: each task changes every 0.5 s or more);
- µs of Daphne CPU per frame (the issue's measure) and per update, each beside bare-hub's at the
  same N; bytes per frame; the load average.

The baselines' frame is --frame-bytes long; by default the size of one task-list row update,
measured once at the start (one product tab, changes 0.4 s apart). The machine has 2 cores shared
with other sessions: read the ratios, and the load average printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import multiprocessing
import os
import queue
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import serving  # noqa: E402
from bench.fanout import SINCE, WS_CONNECT, marked  # noqa: E402

MODES = ("bare-hub", "bare-group", "list", "page")
LABELS = {"bare-hub": "bare-hub", "bare-group": "bare-group", "list": "task list", "page": "task page"}
WATCHED = 10  # the task page mode's tasks
USERS = 4  # viewer, operator, viewer, operator
ROW_ID = re.compile(r'<tr id="task-row-(\d+)"')
PROBE_CHANGES = 6
DRAIN_SECONDS = 30  # after the driver stops: frames still on their way are late, not lost


# --- set-up and driver (sub-commands, Django set up in their own process) -------------------------


def setup_main(argv: list[str]) -> None:
    """`fanout_cost.py setup --tasks N`: migrate, people and sessions, a server row and N working
    tasks; prints SETUP {"sessions": [...], "tasks": [...]} (tasks newest first)."""
    parser = argparse.ArgumentParser(prog="fanout_cost.py setup")
    parser.add_argument("--tasks", type=int, required=True)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from django.core.management import call_command

    from tasksapp import services
    from tasksapp.mcpclient.types import parse_detailed_task
    from tasksapp.models import McpServer

    call_command("migrate", verbosity=0, interactive=False)
    sessions = serving.signed_in_sessions(USERS)
    server = McpServer.objects.create(
        name="bench", url="http://127.0.0.1:9/mcp", era="modern", tasks_supported=True
    )
    tasks = []
    for i in range(args.tasks):
        snapshot = parse_detailed_task(_wire(f"bench-task-{i}", "starting", _now_iso()))
        task = services.task_create(
            server=server, snapshot=snapshot, tool_name="slow_count", arguments={"n": i}, user=None
        )
        tasks.append(task.pk)
    print("SETUP " + json.dumps({"sessions": sessions, "tasks": tasks[::-1]}), flush=True)


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()


def _wire(task_id: str, message: str, at: str, created: str | None = None) -> dict[str, Any]:
    """A working task as tasks/get returns it."""
    return {
        "taskId": task_id,
        "status": "working",
        "statusMessage": message,
        "createdAt": created or at,
        "lastUpdatedAt": at,
        "ttlMs": None,
        "pollIntervalMs": 1000,
    }


def drive_main(argv: list[str]) -> None:
    """`fanout_cost.py drive --kind product|bare --tasks 1,2 --rate R --seconds S`: once a line comes on
    its standard input, R changes a second for S seconds, round robin over the tasks; prints STARTED,
    then DRIVEN {"changes": [[t, pk]...], ...}."""
    parser = argparse.ArgumentParser(prog="fanout_cost.py drive")
    parser.add_argument("--kind", choices=("product", "bare"), required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from tasksapp import events
    from tasksapp.engine import snapshots
    from tasksapp.mcpclient.types import parse_detailed_task
    from tasksapp.models import RemoteTask

    ids = [int(pk) for pk in args.tasks.split(",")]
    rows = {task.pk: task for task in RemoteTask.objects.filter(pk__in=ids)}
    remote = {pk: (rows[pk].remote_id, rows[pk].created_at_raw) for pk in ids}
    events.publish_task_changed(ids[0])  # the publisher thread and its connection, before the clock
    events.wait_sent(10)
    sys.stdin.readline()  # the bench's go, once every socket is open
    print("STARTED", flush=True)
    run = secrets.token_hex(3)  # every message new to the row, whatever earlier runs wrote
    changes: list[tuple[float, int]] = []
    unchanged, behind = 0, 0.0
    # Late (the machine is shared), it goes on from now instead of catching up in a burst: two
    # changes to one task within a coalescing period would be one update on its pages.
    for late in serving.paced(1 / args.rate, args.seconds, catch_up=False):
        behind = max(behind, late)
        pk = ids[len(changes) % len(ids)]
        if args.kind == "product":
            task_id, created = remote[pk]
            wire = _wire(task_id, f"{run} step {len(changes)}", _now_iso(), created)
            [changed] = snapshots.apply_snapshots([(pk, parse_detailed_task(wire))], "poll")
            unchanged += not changed
        else:
            events.publish_task_changed(pk)  # outside a transaction: sent at once
        changes.append((time.time(), pk))
    sent = events.wait_sent(30)
    print("DRIVEN " + json.dumps({"changes": changes, "unchanged": unchanged, "behind_s": round(behind, 3),
                                  "all_sent": sent}), flush=True)  # fmt: skip


# --- the client process: N sockets, counted in shared arrays ------------------------------------


def client_main(specs: list[dict[str, Any]], counts: Any, commands: Any, results: Any) -> None:
    """`counts` holds three int64s per socket: frames, updates, bytes (written here only)."""
    asyncio.run(_client(specs, counts, commands, results))


async def _client(specs: list[dict[str, Any]], counts: Any, commands: Any, results: Any) -> None:
    import aiohttp

    closed: list[str] = [""] * len(specs)
    opened: list[int] = []
    stop = asyncio.Event()
    gate = asyncio.Semaphore(20)  # pages load a few at a time, as a person opens tabs
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        tabs = [
            asyncio.create_task(_tab(i, spec, http, gate, stop, counts, closed, opened))
            for i, spec in enumerate(specs)
        ]
        while len({*opened, *(j for j, reason in enumerate(closed) if reason)}) < len(specs):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        results.put(("opened", opened, [reason for reason in closed if reason]))
        while True:
            try:
                commands.get_nowait()
                break
            except queue.Empty:
                await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*tabs, return_exceptions=True)
    results.put(("done", [reason for reason in closed if reason and reason != "stopped"]))


async def _tab(
    i: int,
    spec: dict[str, Any],
    http: Any,
    gate: asyncio.Semaphore,
    stop: asyncio.Event,
    counts: Any,
    closed: list[str],
    opened: list[int],
) -> None:
    import aiohttp

    base = spec["base"]
    headers = {"Cookie": f"sessionid={spec['session']}"} if spec.get("session") else {}
    try:
        async with gate:
            if spec.get("page"):
                page = await (await http.get(base + spec["page"], headers=headers)).text()
                connect, since = WS_CONNECT.search(page), SINCE.search(page)
                if not connect or not since:
                    closed[i] = f"no live page at {spec['page']}"
                    return
                url = base.replace("http://", "ws://") + html.unescape(connect.group(1))
                url += "&since=" + since.group(1)
            else:
                url = base.replace("http://", "ws://") + spec["ws"]
            socket = await http.ws_connect(
                url, headers={**headers, "Origin": base}, max_msg_size=0, heartbeat=None
            )
        opened.append(i)
    except (aiohttp.ClientError, OSError) as exc:
        closed[i] = f"refused: {exc!r}"
        return
    rows = spec.get("rows", False)
    async with socket:
        try:
            async for data in serving.text_frames(socket, stop):
                counts[3 * i] += 1
                counts[3 * i + 1] += len(set(ROW_ID.findall(data))) if rows else 1
                counts[3 * i + 2] += len(data)
        except serving.SocketEnded as ended:
            closed[i] = str(ended)
            return
    closed[i] = "stopped"


# --- one run ------------------------------------------------------------------------------------


def plan(mode: str, tabs: int, base: str, sessions: list[str], tasks: list[int]) -> list[dict[str, Any]]:
    """What each socket opens; sessions alternate viewer and operator."""
    specs: list[dict[str, Any]] = []
    for i in range(tabs):
        spec: dict[str, Any] = {"base": base, "session": sessions[i % len(sessions)]}
        if mode.startswith("bare-"):
            spec["ws"] = f"/ws/{mode}/"
        elif mode == "list":
            spec.update(page="/tasks/", rows=True)
        else:
            pk = tasks[i % WATCHED]
            spec.update(page=f"/tasks/{pk}/", task=pk)
        specs.append(spec)
    return specs


def _drained(counts: Any, limit: float) -> list[int]:
    """The sockets' counts once no frame has arrived for a second (at most `limit` seconds)."""
    deadline, last = time.monotonic() + limit, list(counts)
    while time.monotonic() < deadline:
        time.sleep(1)
        now = list(counts)
        if now == last:
            break
        last = now
    return last


def run_one(
    args: argparse.Namespace,
    mode: str,
    tabs: int,
    env: dict[str, str],
    setup: dict[str, Any],
    logs: Path,
    frame_bytes: int,
    rate: float | None = None,
    seconds: float | None = None,
    warm_up: float | None = None,
) -> dict[str, Any]:
    """One fresh Daphne with `tabs` sockets of `mode`, driven for warm-up + window; its figures."""
    import redis

    rate, seconds = rate or args.rate, seconds or args.seconds
    warm_up = args.warm_up if warm_up is None else warm_up
    redis.Redis.from_url(env["REDIS_URL"]).flushdb()  # no group members left by an earlier Daphne
    port = serving.free_port()
    base = f"http://127.0.0.1:{port}"
    bare = mode.startswith("bare-")
    app = "bench.fanout_bare:application" if bare else "dashboard.asgi:application"
    tasks = setup["tasks"] if mode != "page" else setup["tasks"][:WATCHED]
    specs = plan(mode, tabs, base, setup["sessions"], tasks)
    context = multiprocessing.get_context("spawn")
    counts = context.Array("q", 3 * tabs, lock=False)
    commands, results = context.Queue(), context.Queue()
    drive = [
        sys.executable, str(ROOT / "bench" / "fanout_cost.py"), "drive",
        "--kind", "bare" if bare else "product", "--tasks", ",".join(map(str, tasks)),
        "--rate", str(rate), "--seconds", str(warm_up + seconds + 0.5),
    ]  # fmt: skip
    # Started first, so that its Django is set up while Daphne starts and the sockets open; it waits
    # for a line on its standard input.
    driver = subprocess.Popen(
        drive, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    daphne = serving.daphne(app, port)
    log = logs / f"daphne-{mode}-{tabs}.log"
    client = context.Process(target=client_main, args=(specs, counts, commands, results), daemon=True)
    try:
        with serving.server(daphne, {**env, "FANOUT_FRAME_BYTES": str(frame_bytes)}, f"{base}/", log) as pid:
            client.start()
            _, opened, refused = results.get(timeout=600)
            if not opened:
                raise RuntimeError(f"[{mode} {tabs}] no socket opened: {refused[:3]}")
            assert driver.stdin is not None and driver.stdout is not None
            driver.stdin.write("go\n")
            driver.stdin.flush()
            if driver.stdout.readline().strip() != "STARTED":
                raise RuntimeError(f"the driver did not start:\n{driver.communicate(timeout=30)[1]}")
            started = list(counts)

            def reading() -> tuple[float, float, float, list[Any]]:
                daphne_cpu, client_cpu = serving.cpu_seconds(pid), serving.cpu_seconds(client.pid or 0)
                return (time.time(), daphne_cpu, client_cpu, list(counts))

            time.sleep(warm_up)
            before = reading()
            time.sleep(seconds)
            after = reading()
            load = serving.load()
            out, err = driver.communicate(timeout=seconds + warm_up + 120)
            if driver.returncode != 0:
                raise RuntimeError(f"the driver exited {driver.returncode}:\n{err[-3000:]}")
            ended, drained = list(counts), _drained(counts, DRAIN_SECONDS)
            commands.put("stop")
            _, lost = results.get(timeout=120)
            client.join(30)
    finally:
        for process in (driver, client):
            if (process.poll() is None) if isinstance(process, subprocess.Popen) else process.is_alive():
                process.kill()
    counted = {"started": started, "before": before[3], "after": after[3], "ended": ended, "drained": drained}
    return {
        "mode": mode, "tabs": tabs, "opened": len(opened), "refused": refused[:3], "closed": lost[:3],
        **_figures(mode, specs, opened, tasks, marked(out, "DRIVEN"), before, after, counted),
        "client_cores": round((after[2] - before[2]) / (after[0] - before[0]), 2), "load": load,
    }  # fmt: skip


def _figures(
    mode: str,
    specs: list[dict[str, Any]],
    opened: list[int],
    tasks: list[int],
    driven: dict[str, Any],
    before: tuple[float, float, float, list[int]],
    after: tuple[float, float, float, list[int]],
    counted: dict[str, list[int]],
) -> dict[str, Any]:
    """Frames and updates in the window against those expected, CPU per frame and per update."""
    watching: dict[int, int] = {}  # task -> open sockets that show its changes
    for i in opened:
        for pk in [specs[i]["task"]] if mode == "page" else tasks:
            watching[pk] = watching.get(pk, 0) + 1
    t0, t1 = before[0], after[0]
    expected = sum(watching.get(pk, 0) for t, pk in driven["changes"] if t0 <= t < t1)
    expected_all = sum(watching.get(pk, 0) for _, pk in driven["changes"])

    def between(first: str, last: str, column: int) -> int:
        return sum(counted[last][column::3]) - sum(counted[first][column::3])

    frames, updates, size = (between("before", "after", column) for column in range(3))
    cpu = after[1] - before[1]
    silent = sum(1 for i in opened if counted["after"][3 * i] == counted["before"][3 * i])
    return {
        "seconds": round(t1 - t0, 2), "changes": sum(1 for t, _ in driven["changes"] if t0 <= t < t1),
        "rate": round(sum(1 for t, _ in driven["changes"] if t0 <= t < t1) / (t1 - t0), 1),
        "frames": frames, "updates": updates, "expected": expected, "silent_sockets": silent,
        "driven_updates_expected": expected_all,
        "never_delivered": max(0, expected_all - between("started", "drained", 1)),
        "late_updates": between("ended", "drained", 1),
        "bytes_per_frame": round(size / frames) if frames else None,
        "daphne_cpu_s": round(cpu, 3), "daphne_cores": round(cpu / (t1 - t0), 2),
        "us_per_frame": round(cpu / frames * 1e6, 1) if frames else None,
        "us_per_update": round(cpu / updates * 1e6, 1) if updates else None,
        "driver_behind_s": driven["behind_s"], "unchanged": driven["unchanged"],
    }  # fmt: skip


def probe_frame_bytes(
    args: argparse.Namespace, env: dict[str, str], setup: dict[str, Any], logs: Path
) -> int:
    """The size of one task-list row update as the product sends it: one operator tab on /tasks/,
    changes 0.4 s apart (so no two share a frame)."""
    operator = {**setup, "sessions": setup["sessions"][1:2]}
    run = run_one(args, "list", 1, env, operator, logs, 0, rate=2.5, seconds=PROBE_CHANGES / 2.5, warm_up=0.5)
    if not run["frames"]:
        raise RuntimeError(f"the frame-size probe received no frame: {run}")
    return int(run["bytes_per_frame"])


# --- output -------------------------------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _ratio(value: float | None, floor: float | None) -> str:
    return f"{value / floor:.1f}x" if value is not None and floor else "-"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def report(runs: list[dict[str, Any]], args: argparse.Namespace, frame_bytes: int) -> None:
    tabs = sorted({run["tabs"] for run in runs})
    modes = [mode for mode in MODES if any(run["mode"] == mode for run in runs)]
    floors = {
        n: {
            key: _median([run[key] for run in runs if run["mode"] == "bare-hub" and run["tabs"] == n])
            for key in ("us_per_frame", "us_per_update")
        }
        for n in tabs
    }
    print(f"\n== Fan-out cost: Daphne CPU per delivered frame, {args.rate:g} changes/s, "
          f"{args.seconds:g} s windows, {args.rounds} round(s) ==")  # fmt: skip
    print(f"baselines' frame {frame_bytes:,} bytes; load average now {serving.load()}")
    print(
        "\n| run | tabs | changes/s | frames | updates delivered / expected | late / never delivered "
        "| bytes/frame | Daphne cores | µs/frame | x bare-hub | µs/update | x bare-hub | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for run in runs:
        floor = floors[run["tabs"]]
        opened = f"{run['tabs']}" if run["opened"] == run["tabs"] else f"{run['opened']} of {run['tabs']}"
        print(
            f"| {LABELS[run['mode']]} | {opened} | {run['rate']:g} | {run['frames']:,} "
            f"| {run['updates']:,} / {run['expected']:,} "
            f"| {run['late_updates']:,} / {run['never_delivered']:,} "
            f"| {_us(run['bytes_per_frame'])} "
            f"| {run['daphne_cores']:.2f} | {_us(run['us_per_frame'])} "
            f"| {_ratio(run['us_per_frame'], floor['us_per_frame'])} | {_us(run['us_per_update'])} "
            f"| {_ratio(run['us_per_update'], floor['us_per_update'])} | {run['load']} |"
        )
    header = " | ".join(f"{n} tabs" for n in tabs)
    print(f"\n| µs of Daphne CPU per delivered frame (x bare-hub) | {header} |")
    print("|---|" + "---:|" * len(tabs))
    for mode in modes:
        cells = []
        for n in tabs:
            value = _median([run["us_per_frame"] for run in runs if run["mode"] == mode and run["tabs"] == n])
            cells.append(f"{_us(value)} ({_ratio(value, floors[n]['us_per_frame'])})")
        print(f"| {LABELS[mode]} | " + " | ".join(cells) + " |")
    print(f"\n| µs of Daphne CPU per update (one change shown in one tab) (x bare-hub) | {header} |")
    print("|---|" + "---:|" * len(tabs))
    for mode in modes:
        cells = []
        for n in tabs:
            value = _median(
                [run["us_per_update"] for run in runs if run["mode"] == mode and run["tabs"] == n]
            )
            cells.append(f"{_us(value)} ({_ratio(value, floors[n]['us_per_update'])})")
        print(f"| {LABELS[mode]} | " + " | ".join(cells) + " |")
    print(
        "\nGoal (issue 24): task list <= 1.5x bare-hub, task page <= 2x, at 50, 100 and 250 tabs. A "
        "task-list frame carries every row its socket noticed in one coalescing period (LIVE_COALESCE_MS); a "
        "baseline's or a task page's frame, one change. Late: updates that arrived after the driver "
        "stopped (a backlog); never delivered: of all the driven changes, once no frame came for 1 s."
    )


@contextmanager
def database(url: str | None) -> Iterator[str]:
    """The throw-away database --database-url names (dropped and created again, dropped after), or a
    new one."""
    if url is None:
        with serving.postgres_database("bench_fanout_cost") as fresh:
            yield fresh
        return
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not url.startswith("postgres") or "bench" not in name:
        raise SystemExit(f"--database-url must name a throw-away PostgreSQL database ('bench' in it): {url}")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("setup", "drive"):
        {"setup": setup_main, "drive": drive_main}[sys.argv[1]](sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tabs", default="50,100,250", help="numbers of open sockets, comma-separated")
    parser.add_argument("--modes", default="all", help=f"all, or some of {','.join(MODES)}")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    parser.add_argument("--warm-up", type=float, default=3.0, help="driven seconds before the window")
    parser.add_argument("--rate", type=float, default=20.0, help="task changes per second")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=30, help="tasks on the list's first page (at most 50)")
    parser.add_argument("--frame-bytes", type=int, help="the baselines' frame (default: measured)")
    parser.add_argument("--redis-db", type=int, default=11, help="a Redis database index of the bench's own")
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database ('bench' in its name)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    modes = list(MODES) if args.modes == "all" else args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown or not WATCHED <= args.tasks <= 50:
        parser.error(f"unknown modes {sorted(unknown)}" if unknown else "--tasks must be 10 to 50")
    tab_counts = [int(n) for n in args.tabs.split(",")]
    logs = Path(tempfile.mkdtemp(prefix="bench-fanout-cost-"))
    print(f"{os.cpu_count()} cores; load average {serving.load()}; logs in {logs}", flush=True)
    with database(args.database_url) as url:
        env = serving.bench_env(
            DATABASE_URL=url, DASHBOARD_VAR_DIR=str(logs), SECRET_KEY=secrets.token_urlsafe(48),
            DJANGO_SETTINGS_MODULE="dashboard.settings",
        )  # fmt: skip
        setup_out = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "fanout_cost.py"), "setup", "--tasks", str(args.tasks)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if setup_out.returncode != 0:
            raise SystemExit(f"set-up failed:\n{setup_out.stdout}{setup_out.stderr}")
        setup = marked(setup_out.stdout, "SETUP")
        live_env = {**env, "REDIS_URL": f"redis://127.0.0.1:6379/{args.redis_db}"}
        frame_bytes = args.frame_bytes or probe_frame_bytes(args, live_env, setup, logs)
        print(f"{args.tasks} tasks, {USERS} users; baselines' frame {frame_bytes:,} bytes", flush=True)
        runs = []
        for n in tab_counts:
            for round_ in range(args.rounds):
                for mode in modes:
                    run = run_one(args, mode, n, live_env, setup, logs, frame_bytes)
                    runs.append({**run, "round": round_ + 1})
                    print(json.dumps(runs[-1]), flush=True)
    report(runs, args, frame_bytes)
    if args.json:
        args.json.write_text(json.dumps({"frame_bytes": frame_bytes, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
