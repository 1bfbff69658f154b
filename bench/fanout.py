"""Fan-out at scale (issue 13 goal 1): hundreds of open tabs, a fixed rate of task changes, and the
time from each change to each tab's websocket message.

    flock /tmp/heavy.lock env PYTHONPATH=$PWD .venv/bin/python bench/fanout.py \\
        [--tabs 500] [--daphne 2] [--rate 100] [--seconds 30] [--modes current,baseline] [--json out.json]

What runs, each in its own process, as in production (docs/deploy.md): a fresh PostgreSQL database;
the reference MCP server (tasksapp/demoserver); one worker (`manage.py worker`, listening for
pushes); Daphne (N of them) on the Redis channel layer (a Redis database index of the bench's own,
`--redis-db`); a driver (`manage.py shell`) that starts tasks on the reference server at a steady
pace; and client processes holding the tabs.

The change rate is made by real tasks on the reference server, through the worker (push path),
PostgreSQL and the channel layer, never around them. Most of it comes from `rate * 0.5` "rolling"
`slow_count` tasks, each changing its status message every 0.5 s, started (4 at a time: a
`call_start` costs 0.3-1 s here) once the task list, inbox and overview tabs are open, and living
through the warm-up and the window (staggered ends after it). Task-page tabs then open on the
first of them, five tabs a task. During the warm-up and the window a driver (`manage.py shell`)
starts one task a second: every other one a short `slow_count` (created, 10 messages, completed:
new rows at the top of the task lists), the others `ask_url`, which asks a question and waits
(new items in the inboxes).

Each tab is what a browser does: it GETs its page with a logged-in session's cookie (users of
two roles, viewer and operator, so two audiences), reads `ws-connect` and the page's
`data-since`, and opens the websocket with the session cookie and the page's own Origin. It
records when each state of each task first reached it (parsed from the fragments: a row's or a
task card's status and message, an inbox item's question, the overview's tiles). A reload hint
makes it re-fetch the page, as app.js does.

Latency: the worker records every change in the task's timeline with its time
(`TaskEvent.observed_at`; the bench sets `MCP_TIMELINE_COALESCE_MS=0` so that no status message is
merged into another). A change's latency in a tab is the time from that moment to the first
message that shows this state or a later one (coalescing may skip a state that a later one
replaced). Changes observed while every tab was open count; the overview's figure is the time to
its next message after the change (it refreshes at most every `LIVE_OVERVIEW_MS`, 1 s, by design).

Missing final states: once the tasks have finished (or are waiting on their question), every
tab must show each task's final state: every task on the task list tabs, its task on a task-page
tab, each open question on the inbox tabs, the overview's final tile counts (as `/` renders them
then). The bench waits up to `--grace` seconds for them and counts those that never arrive.

Modes, run one after another on fresh databases in the same invocation:
- `current`: the product as it is.
- `unbatched`: the product without the fan-out batching (tasksapp/live/fanout.py): each list row
  rendered in its own database step, and each socket's flush on its own timer, as on main before
  this work (one render per change per audience, 150 ms coalescing).
- `baseline`: the design before issue 13, emulated in the same code: Daphne runs through this
  script's `daphne` sub-command, which replaces the shared render (tasksapp/live/shared.py) with a
  render per socket per change and turns coalescing off (`LIVE_COALESCE_MS=0`,
  `LIVE_OVERVIEW_MS=0`). Everything else (the catch-up, gap detection, the frame cap) is today's.

CPU: user+system seconds of each process over the measured window (/proc/<pid>/stat), shown as
cores. The machine has 2 cores and is shared with other sessions: read ratios, not absolutes.
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
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import serving  # noqa: E402

POSTGRES = "postgres://postgres@127.0.0.1:5432"
PAGES = ("tasks", "task", "inbox", "overview")
MIX = {"tasks": 0.4, "task": 0.3, "inbox": 0.15, "overview": 0.15}
STEP_SECONDS = 0.5  # the rolling slow_count tasks change their status message this often
STEPS = 10  # the driver's short slow_count tasks
DRIVER_PER_SECOND = 1.0  # the driver's starts per second; every other one asks a question
ASK_EVERY = 2

SESSIONS = """
import json
from bench.serving import signed_in_sessions
print("SESSIONS " + json.dumps(signed_in_sessions({users})))
"""

START_ROLLING = """
import json
from concurrent.futures import ThreadPoolExecutor
from django.db import close_old_connections
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name="demo")
def start(n):
    try:
        return services.call_start(
            server=server, tool="slow_count", arguments={{"n": n, "delay": {delay}}}, user=None
        ).task.pk
    finally:
        close_old_connections()
with ThreadPoolExecutor(4) as pool:
    ids = list(pool.map(start, {steps!r}))
print("ROLLING " + json.dumps(ids))
"""

DRIVE = """
import json
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name="demo")
from bench.serving import paced
started, behind = 0, 0.0
for late in paced(1 / {per_second}, {seconds}):
    behind = max(behind, late)
    if started % {ask_every} == {ask_every} - 1:
        services.call_start(server=server, tool="ask_url", arguments={{"delay": 0.5}}, user=None)
    else:
        services.call_start(server=server, tool="slow_count", arguments={arguments!r}, user=None)
    started += 1
print("DRIVEN " + json.dumps({{"started": started, "behind_s": round(behind, 3)}}))
"""


# --- processes ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Stack:
    logs: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=env or self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if not name.startswith("driver") and process.poll() is not None:
                raise RuntimeError(f"{name} exited {process.returncode}:\n{self.log(name)[-3000:]}")

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def marked(output: str, mark: str) -> Any:
    lines = [line for line in output.splitlines() if line.startswith(mark + " ")]
    return json.loads(lines[-1].removeprefix(mark + " "))


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


@contextmanager
def postgres_database(keep: bool = False) -> Iterator[str]:
    import psycopg

    name = f"fanout_{secrets.token_hex(6)}"
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{POSTGRES}/{name}"
        finally:
            if keep:
                print(f"kept {POSTGRES}/{name}", flush=True)
            else:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sql(database_url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def free_port() -> int:
    from tests.peers.launch import free_port as pick

    return pick()


def http_up(base: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base}/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --- the tabs (client processes) ------------------------------------------------------------------

ROW = re.compile(r'<tr id="task-row-(\d+)"[^>]*>(.*?)</tr>', re.S)
STATUS = re.compile(r'data-status="([^"]*)"')
ROW_MESSAGE = re.compile(r'<td[^>]*class="message"[^>]*>(.*?)</td>', re.S)  # the latest message
CARD = re.compile(r'id="task-card"(.*?)<p class="status-message">(.*?)</p>', re.S)
INBOX = re.compile(r'<div id="inbox-task-(\d+)" class="inbox-task"[^>]*>\s*(<h2>|<div class="inbox-row")?')
TILE = re.compile(r'data-tile="([\w-]+)"><b>(\d+)</b>')
WS_CONNECT = re.compile(r'ws-connect="([^"]+)"')
SINCE = re.compile(r'id="live-sync"[^>]*data-since="([^"]+)"')
RELOAD = re.compile(r'id="live-reload"[^>]*data-reload="([^"]*)"')


DISPLAYED = {"needs input": "input_required"}  # RemoteTask.display_status's labels, back to statuses


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


@dataclass
class Tab:
    page: str  # tasks, task, inbox, overview
    path: str
    base: str
    session: str
    task: int = 0
    first: dict[Any, float] = field(default_factory=dict)  # state -> first time seen
    last: dict[int, Any] = field(default_factory=dict)  # task -> last state seen
    frames: list[float] = field(default_factory=list)  # arrival times (the overview)
    tiles: dict[str, int] = field(default_factory=dict)
    reloads: int = 0
    messages: int = 0
    closed: str = ""
    opened: bool = False

    def see(self, text: str, now: float) -> None:
        if self.page == "tasks":
            for pk, body in ROW.findall(text):
                status = STATUS.search(body)
                message = ROW_MESSAGE.search(body)
                if status and message:
                    self._state(int(pk), (status.group(1), _text(message.group(1))), now)
        elif self.page == "task":
            for head, message in CARD.findall(text):
                status = STATUS.search(head)
                if status:
                    self._state(self.task, (status.group(1), _text(message)), now)
        elif self.page == "inbox":
            for pk, asking in INBOX.findall(text):
                self._state(int(pk), ("asking" if asking else "none", ""), now)
        else:
            tiles = TILE.findall(text)
            if tiles:
                self.frames.append(now)
                self.tiles = {key: int(count) for key, count in tiles}

    def _state(self, pk: int, state: tuple[str, str], now: float) -> None:
        state = (DISPLAYED.get(state[0], state[0]), state[1])
        self.first.setdefault((pk, *state), now)
        self.last[pk] = state


async def _run_tab(
    tab: Tab, http: Any, stop: asyncio.Event, opened: list[int], gate: asyncio.Semaphore
) -> None:
    counted = sum(opened)
    try:
        await _tab(tab, http, stop, opened, gate)
    except Exception as exc:  # a tab that failed is reported, the others go on
        tab.closed = f"failed: {exc!r}"
        if sum(opened) == counted:
            opened[1] += 1


async def _tab(tab: Tab, http: Any, stop: asyncio.Event, opened: list[int], gate: asyncio.Semaphore) -> None:
    import aiohttp

    headers = {"Cookie": f"sessionid={tab.session}"}
    async with gate:  # tabs open a few at a time, as a person opens them
        page = await (await http.get(tab.base + tab.path, headers=headers)).text()
        tab.see(page, time.time())
        connect = WS_CONNECT.search(page)
        since = SINCE.search(page)
        if not connect or not since:
            tab.closed = "no live page"
            opened[1] += 1
            return
        url = tab.base.replace("http://", "ws://") + html.unescape(connect.group(1))
        url += "&since=" + since.group(1)
        try:
            socket = await http.ws_connect(
                url, headers={**headers, "Origin": tab.base}, max_msg_size=0, heartbeat=None
            )
        except aiohttp.ClientError as exc:
            tab.closed = f"refused: {exc}"
            opened[1] += 1
            return
        opened[0] += 1
        tab.opened = True
    async with socket:
        try:
            async for data in serving.text_frames(socket, stop):
                tab.messages += 1
                tab.see(data, time.time())
                reload = RELOAD.search(data)
                if reload and reload.group(1):
                    tab.reloads += 1
                    tab.see(await (await http.get(tab.base + tab.path, headers=headers)).text(), time.time())
        except serving.SocketEnded as ended:
            tab.closed = str(ended)


async def _all_open(opened: list[int], total: int) -> None:
    while sum(opened) < total:  # noqa: ASYNC110  (counted by the tabs' tasks; polled, not signalled)
        await asyncio.sleep(0.05)


def _satisfied(tab: Tab, finals: dict[int, tuple[str, str]], asking: set[int], tiles: dict[str, int]) -> int:
    """How many of this tab's final states have not arrived (a tab that never opened is counted as
    refused instead)."""
    if not tab.opened:
        return 0
    if tab.page == "tasks":
        return sum(1 for pk, state in finals.items() if tab.last.get(pk) != state)
    if tab.page == "task":
        return int(tab.last.get(tab.task) != finals.get(tab.task))
    if tab.page == "inbox":
        return sum(1 for pk in asking if tab.last.get(pk) != ("asking", ""))
    return int(tab.tiles != tiles)


def _examples(tab: Tab, finals: dict[int, tuple[str, str]], asking: set[int]) -> list[Any]:
    """A few (task, what the tab last showed, the final state) that differ, for the report."""
    if tab.page == "tasks":
        return [[pk, tab.last.get(pk), state] for pk, state in finals.items() if tab.last.get(pk) != state]
    if tab.page == "task" and tab.last.get(tab.task) != finals.get(tab.task):
        return [[tab.task, tab.last.get(tab.task), finals.get(tab.task)]]
    if tab.page == "inbox":
        return [[pk, tab.last.get(pk), "asking"] for pk in asking if tab.last.get(pk) != ("asking", "")]
    return []


async def _command(commands: Any) -> Any:
    while True:  # the orchestrator's next command, from a multiprocessing queue
        try:
            return commands.get_nowait()
        except queue.Empty:
            await asyncio.sleep(0.1)


def client_main(specs: list[dict[str, Any]], commands: Any, results: Any) -> None:
    asyncio.run(_client(specs, commands, results))


async def _client(specs: list[dict[str, Any]], commands: Any, results: Any) -> None:
    import aiohttp

    tabs = [Tab(**spec) for spec in specs]
    stop = asyncio.Event()
    opened = [0, 0]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        gate = asyncio.Semaphore(20)
        runners = [asyncio.create_task(_run_tab(tab, http, stop, opened, gate)) for tab in tabs]
        await _all_open(opened, len(tabs))
        results.put(("opened", opened[0], [t.closed for t in tabs if t.closed]))
        # Then the task pages, once the orchestrator has started the tasks they show.
        later = [Tab(**spec) for spec in (await _command(commands))["open"]]
        runners += [asyncio.create_task(_run_tab(tab, http, stop, opened, gate)) for tab in later]
        tabs += later
        await _all_open(opened, len(tabs))
        results.put(("opened", opened[0], [t.closed for t in later if t.closed]))
        command = await _command(commands)  # the final states
        finals = {int(k): tuple(v) for k, v in command["finals"].items()}
        asking, tiles, deadline = (
            set(command["asking"]),
            command["tiles"],
            time.monotonic() + command["grace"],
        )
        while time.monotonic() < deadline:
            if not any(_satisfied(tab, finals, asking, tiles) for tab in tabs):
                break
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*runners, return_exceptions=True)
    missing = [_satisfied(tab, finals, asking, tiles) for tab in tabs]
    results.put(
        (
            "done",
            [
                {
                    "page": tab.page,
                    "task": tab.task,
                    "first": [[*key, t] for key, t in tab.first.items()],
                    "frames": tab.frames,
                    "missing": miss,
                    "examples": _examples(tab, finals, asking)[:3],
                    "reloads": tab.reloads,
                    "messages": tab.messages,
                    "closed": tab.closed,
                }
                for tab, miss in zip(tabs, missing, strict=True)
            ],
        )
    )


# --- the probe: when each change was published on the channel layer ---------------------------


def probe_main(redis_url: str, commands: Any, results: Any) -> None:
    asyncio.run(_probe(redis_url, commands, results))


async def _probe(redis_url: str, commands: Any, results: Any) -> None:
    """A channel in the `tasks` group, as a web process's socket would be: the arrival time of each
    task.changed message, to split a change's latency into publishing and delivering."""
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[redis_url], capacity=100_000)
    channel = await layer.new_channel()
    await layer.group_add("tasks", channel)
    results.put(("probe", "ready"))
    arrivals: list[tuple[int, float]] = []
    while commands.empty():
        try:
            message = await asyncio.wait_for(layer.receive(channel), 0.5)
        except TimeoutError:
            continue
        arrivals.append((int(message.get("id", 0)), time.time()))
    await layer.group_discard("tasks", channel)
    results.put(("probe", arrivals))


# --- one run ------------------------------------------------------------------------------------


def plan_tabs(total: int, bases: list[str], sessions: list[str]) -> list[dict[str, Any]]:
    """Task list, inbox and overview tabs; the task pages come later (plan_task_pages)."""
    counts = {page: int(total * share) for page, share in MIX.items()}
    counts["tasks"] += total - sum(counts.values())
    paths = {"tasks": "/tasks/", "inbox": "/inbox/", "overview": "/"}
    specs = [
        {"page": page, "path": paths[page]}
        for page in ("tasks", "inbox", "overview")
        for _ in range(counts[page])
    ]
    for i, spec in enumerate(specs):
        spec.update(base=bases[i % len(bases)], session=sessions[i % len(sessions)])
    return specs


def plan_task_pages(
    count: int, bases: list[str], sessions: list[str], tasks: list[int]
) -> list[dict[str, Any]]:
    """Task-page tabs, five to a task (so renders can be shared), spread over processes and users."""
    watched = tasks[: max(1, count // 5)]
    return [
        {
            "page": "task",
            "task": watched[i % len(watched)],
            "path": f"/tasks/{watched[i % len(watched)]}/",
            "base": bases[i % len(bases)],
            "session": sessions[(i * 7) % len(sessions)],
        }
        for i in range(count)
    ]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_mode(args: argparse.Namespace, mode: str, logs: Path) -> dict[str, Any]:
    from tests.peers.launch import demoserver_argv, running

    secret = secrets.token_urlsafe(48)
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    result: dict[str, Any] = {"mode": mode, "tabs": args.tabs, "daphne": args.daphne, "rate": args.rate}
    with postgres_database(args.keep_db) as database, ExitStack() as stack_exit:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "DEBUG")
        }
        env.update(
            DATABASE_URL=database,
            SECRET_KEY=secret,
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="WARNING",
            MCP_TIMELINE_COALESCE_MS="0",
            PYTHONPATH=str(ROOT),
        )
        phases: dict[str, float] = {}
        mark = time.monotonic()

        def phase(name: str) -> None:
            nonlocal mark
            phases[name] = round(time.monotonic() - mark, 1)
            mark = time.monotonic()

        result["phases"] = phases
        manage(env, "migrate", "--noinput")
        phase("migrate")
        peer = stack_exit.enter_context(
            running(
                f"fanout-demo-{mode}",
                demoserver_argv("--poll-interval-ms", "250"),
                "demoserver listening on",
            )
        )
        manage(env, "servers", "add", "demo", peer.url, "--json")
        sessions = marked(manage(env, "shell", "-c", SESSIONS.format(users=args.users)), "SESSIONS")
        phase("demoserver, users")
        live_env = {**env, "REDIS_URL": redis_url}
        if mode == "baseline":
            live_env.update(LIVE_COALESCE_MS="0", LIVE_OVERVIEW_MS="0")
        stack = Stack(logs, live_env)
        stack_exit.callback(stack.close)
        stack.start(
            f"worker-{mode}",
            [sys.executable, "manage.py", "worker", "--name", f"fan-{mode}"],
            {**live_env, "LOG_LEVEL": "INFO"},
        )
        bases = []
        for i in range(args.daphne):
            port = free_port()
            argv = [sys.executable, str(Path(__file__).resolve()), "daphne"]
            argv += {"baseline": ["--baseline"], "unbatched": ["--unbatched"]}.get(mode, [])
            argv += ["--", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"]
            daphne_env = {**live_env}
            if args.profile:
                daphne_env["FANOUT_PROFILE"] = str(logs / f"daphne{i}-{mode}.prof")
            stack.start(f"daphne{i}-{mode}", argv, daphne_env)
            bases.append(f"http://127.0.0.1:{port}")
        for base in bases:
            wait_for(lambda base=base: http_up(base), 60, f"Daphne at {base}")

        phase("worker, daphne")
        specs = plan_tabs(args.tabs, bases, sessions)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        shares = [specs[i :: args.clients] for i in range(args.clients)]
        commands = [ctx.Queue() for _ in shares]
        clients = [
            ctx.Process(target=client_main, args=(share, command, results), daemon=True)
            for share, command in zip(shares, commands, strict=True)
        ]
        probe_commands, probe_results = ctx.Queue(), ctx.Queue()
        probe = ctx.Process(target=probe_main, args=(redis_url, probe_commands, probe_results), daemon=True)
        probe.start()
        probe_results.get(timeout=60)
        opening = time.time()
        for client in clients:
            client.start()
        refused: list[str] = []
        for _ in clients:
            _kind, _opened, closed = results.get(timeout=900)
            refused += closed
        result["open_seconds"] = round(time.time() - opening, 1)
        phase("tabs")
        stack.check_alive()

        # The rolling tasks make most of the change rate: `rate * STEP_SECONDS` slow_count tasks,
        # each changing every STEP_SECONDS through the task pages' opening, the warm-up and the
        # window; they finish at staggered times after it.
        rolling = max(2, round((args.rate - DRIVER_PER_SECOND * 7) * STEP_SECONDS))
        detail_tabs = int(args.tabs * MIX["task"])
        total = args.task_seconds or (5 + rolling * 0.8 + detail_tabs * 0.05 + args.warm_up + args.seconds)
        steps = [int(total * (1 + 0.3 * i / rolling) / STEP_SECONDS) for i in range(rolling)]
        started_at = time.monotonic()
        rolling_tasks = marked(
            manage(live_env, "shell", "-c", START_ROLLING.format(steps=steps, delay=STEP_SECONDS)), "ROLLING"
        )
        result["start_seconds"] = round(time.monotonic() - started_at, 1)
        phase("rolling tasks")
        pages = plan_task_pages(detail_tabs, bases, sessions, rolling_tasks)
        for i, command in enumerate(commands):
            command.put({"open": pages[i :: args.clients]})
        for _ in clients:
            _kind, _opened, closed = results.get(timeout=900)
            refused += closed
        result["refused"] = len(refused)
        phase("task pages")
        if refused:
            print(f"  {len(refused)} tab(s) did not open: {sorted(set(refused))[:5]}", flush=True)
        stack.check_alive()

        # The measured window: the driver at a steady pace while every tab is open.
        per_second = DRIVER_PER_SECOND
        arguments = {"n": STEPS, "delay": STEP_SECONDS}
        drive = DRIVE.format(
            per_second=per_second,
            seconds=args.seconds + args.warm_up,
            ask_every=ASK_EVERY,
            arguments=arguments,
        )
        pids = {name: process.pid for name, process in stack.processes.items()}
        pids["demoserver"] = peer.process.pid
        driver = stack.start(f"driver-{mode}", [sys.executable, "manage.py", "shell", "-c", drive])
        warm_up = time.monotonic() + args.warm_up  # until tasks start and finish at one pace
        while time.monotonic() < warm_up:
            stack.check_alive()
            time.sleep(0.2)
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        clients_before = sum(cpu_seconds(client.pid or 0) for client in clients)
        driver_before = cpu_seconds(driver.pid)
        window_start = time.time()
        driver_cpu = driver_before
        while driver.poll() is None:
            driver_cpu = max(driver_cpu, cpu_seconds(driver.pid))
            stack.check_alive()
            time.sleep(0.5)
        window_end = time.time()
        wall = window_end - window_start
        cpu = {name: (cpu_seconds(pid) - before[name]) / wall for name, pid in pids.items()}
        cpu["clients"] = (sum(cpu_seconds(client.pid or 0) for client in clients) - clients_before) / wall
        cpu["driver"] = (driver_cpu - driver_before) / wall
        driven = marked(stack.log(f"driver-{mode}"), "DRIVEN")
        phase("warm-up, window")
        result["driven"] = driven

        # Quiet: every driven task finished or waiting on its question; the long ones finished too.
        def settled() -> bool:
            [(active,)] = sql(database, "SELECT count(*) FROM tasksapp_remotetask WHERE status = 'working'")
            return int(active) == 0

        wait_for(settled, max(steps) * STEP_SECONDS + 120, "the tasks to finish")
        phase("settle")
        time.sleep(0.5)  # let the worker's last commits publish
        rows = sql(database, "SELECT id, status, status_message FROM tasksapp_remotetask")
        finals = {pk: (status, message) for pk, status, message in rows}
        asking = [pk for pk, status, _ in rows if status == "input_required"]
        tiles = expected_tiles(bases[0], sessions[0])
        probe_commands.put("stop")
        _, arrivals = probe_results.get(timeout=60)
        probe.join(10)
        for command in commands:
            command.put({"finals": finals, "asking": asking, "tiles": tiles, "grace": args.grace})
        tabs: list[dict[str, Any]] = []
        for _ in clients:
            _kind, data = results.get(timeout=args.grace + 300)
            tabs += data
        phase("grace")
        for client in clients:
            client.join(30)
        events = sql(
            database,
            "SELECT task_id, status, status_message, extract(epoch from observed_at) FROM tasksapp_taskevent "
            "ORDER BY task_id, observed_at, id",
        )
        result.update(measure(tabs, events, window_start, window_end))
        result["published"] = published(arrivals, events, window_start, window_end)
        result["cpu"] = {name: round(value, 2) for name, value in cpu.items()}
        result["changes_per_s"] = round(
            sum(1 for _, _, _, at in events if window_start <= float(at) <= window_end) / wall, 1
        )
        result["warnings"] = sum(
            stack.log(name).count("WARNING") for name in stack.processes if name.startswith("daphne")
        )
        result["drops_logged"] = sum(
            sum(stack.log(name).count(mark) for mark in ("were dropped", "over capacity", "were full"))
            for name in stack.processes
        )
    return result


def expected_tiles(base: str, session: str) -> dict[str, int]:
    import httpx

    page = httpx.get(f"{base}/", headers={"Cookie": f"sessionid={session}"}, timeout=60).text
    return {key: int(count) for key, count in TILE.findall(page)}


def measure(
    tabs: list[dict[str, Any]], events: list[tuple[Any, ...]], start: float, end: float
) -> dict[str, Any]:
    """Per page kind: latency p50/p99 of changes observed in the window, missing final states."""
    # Each task's changes in order; a state's index is that of the latest change showing it.
    changes: dict[int, list[tuple[tuple[str, str], float]]] = defaultdict(list)
    for pk, status, message, at in events:
        changes[int(pk)].append(((status, message), float(at)))
    index: dict[int, dict[tuple[str, str], int]] = {
        pk: {state: i for i, (state, _) in enumerate(seq)} for pk, seq in changes.items()
    }
    asked_at = {
        pk: next(at for (status, _), at in seq if status == "input_required")
        for pk, seq in changes.items()
        if any(status == "input_required" for (status, _), _ in seq)
    }
    all_times = sorted(at for seq in changes.values() for _, at in seq if start <= at <= end)
    report: dict[str, Any] = {}
    for page in PAGES:
        mine = [tab for tab in tabs if tab["page"] == page]
        latencies: list[float] = []
        unseen = 0
        for tab in mine:
            if page in ("tasks", "task"):
                # earliest arrival of a state at index >= i, per task
                arrivals: dict[int, list[tuple[int, float]]] = defaultdict(list)
                for pk, status, message, t in tab["first"]:
                    i = index.get(pk, {}).get((status, message))
                    if i is not None:
                        arrivals[pk].append((i, t))
                for pk in [tab["task"]] if page == "task" else list(changes):
                    seen = sorted(arrivals.get(pk, []))
                    best, suffix = float("inf"), []
                    for i, t in reversed(seen):
                        best = min(best, t)
                        suffix.append((i, best))
                    suffix.reverse()
                    for i, (_, at) in enumerate(changes[pk]):
                        if not start <= at <= end:
                            continue
                        shown = next((t for j, t in suffix if j >= i), None)
                        if shown is None:
                            unseen += 1
                        else:
                            latencies.append(max(0.0, shown - at))
            elif page == "inbox":
                asked = {pk: t for pk, status, _, t in tab["first"] if status == "asking"}
                for pk, at in asked_at.items():
                    if start <= at <= end:
                        if pk in asked:
                            latencies.append(max(0.0, asked[pk] - at))
                        else:
                            unseen += 1
            else:
                frames = sorted(tab["frames"])
                position = 0
                for at in all_times:
                    while position < len(frames) and frames[position] < at:
                        position += 1
                    if position < len(frames):
                        latencies.append(frames[position] - at)
                    else:
                        unseen += 1
        report[page] = {
            "tabs": len(mine),
            "p50_ms": _ms(percentile(latencies, 0.5)),
            "p99_ms": _ms(percentile(latencies, 0.99)),
            "max_ms": _ms(max(latencies) if latencies else None),
            "deliveries": len(latencies),
            "never_shown": unseen,
            "missing_final": sum(tab["missing"] for tab in mine),
            "reloads": sum(tab["reloads"] for tab in mine),
            "closed": sum(1 for tab in mine if tab["closed"]),
            "examples": [example for tab in mine for example in tab["examples"]][:6],
        }
    report["missing_final"] = sum(report[page]["missing_final"] for page in PAGES)
    return report


def published(
    arrivals: list[tuple[int, float]], events: list[tuple[Any, ...]], start: float, end: float
) -> Any:
    """Change (observed by the worker) to its message on the channel layer: the part of the latency
    before any web process is involved."""
    by_task: dict[int, list[float]] = defaultdict(list)
    for pk, t in arrivals:
        by_task[pk].append(t)
    latencies = []
    for pk, _, _, at in events:
        at = float(at)
        if start <= at <= end:
            later = [t for t in by_task.get(int(pk), []) if t >= at]
            if later:
                latencies.append(min(later) - at)
    return {"p50_ms": _ms(percentile(latencies, 0.5)), "p99_ms": _ms(percentile(latencies, 0.99))}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


# --- output -------------------------------------------------------------------------------------


def print_table(results: list[dict[str, Any]]) -> None:
    modes = [f"{r['mode']} ({r['tabs']} tabs, {r['daphne']} Daphne)" for r in results]
    rows: list[tuple[str, list[str]]] = []
    for page in PAGES:
        rows.append(
            (
                f"{page}: change → message p50 / p99 ms",
                [f"{r[page]['p50_ms']} / {r[page]['p99_ms']}" for r in results],
            )
        )
    for page in PAGES:
        rows.append((f"{page}: missing final states", [str(r[page]["missing_final"]) for r in results]))
        rows.append(
            (f"{page}: changes never shown in window", [str(r[page]["never_shown"]) for r in results])
        )
    rows.append(
        (
            "change → published on Redis p50 / p99 ms",
            [f"{r['published']['p50_ms']} / {r['published']['p99_ms']}" for r in results],
        )
    )
    rows.append(("missing final states, all tabs", [str(r["missing_final"]) for r in results]))
    rows.append(("changes/s observed", [str(r["changes_per_s"]) for r in results]))
    names = sorted({name for r in results for name in r["cpu"]})
    for name in names:
        rows.append((f"CPU {name} (cores)", [str(r["cpu"].get(name, "")) for r in results]))
    rows.append(("drops logged (WARNING gap / over capacity)", [str(r["drops_logged"]) for r in results]))
    rows.append(
        (
            "tabs refused / reload hints",
            [f"{r['refused']} / {sum(r[p]['reloads'] for p in PAGES)}" for r in results],
        )
    )
    width = max(len(label) for label, _ in rows) + 2
    print("| " + "what".ljust(width) + " | " + " | ".join(modes) + " |")
    print("|" + "-" * (width + 2) + "|" + "|".join("-" * (len(m) + 2) for m in modes) + "|")
    for label, values in rows:
        print(
            "| "
            + label.ljust(width)
            + " | "
            + " | ".join(v.rjust(len(m)) for v, m in zip(values, modes, strict=True))
            + " |"
        )
    print(
        "\nunbatched = main before the fan-out batching: one render per change per audience, each its own "
        "database step; current = rows rendered in batches on a shared flush grid (tasksapp/live/fanout.py)."
    )
    print(
        "baseline = the design before issue 13 emulated in today's code: a render per socket per change "
        "(no shared render) and no coalescing (LIVE_COALESCE_MS=0, LIVE_OVERVIEW_MS=0).\n"
        "Machine: 2 cores shared with other sessions; read the ratios, not the absolute figures."
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "daphne":
        daphne_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tabs", type=int, default=500)
    parser.add_argument("--daphne", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100.0, help="task changes per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="the measured window")
    parser.add_argument(
        "--warm-up", type=float, default=STEPS * STEP_SECONDS + 2, help="driven seconds before the window"
    )
    parser.add_argument(
        "--task-seconds", type=float, default=0, help="the rolling tasks' lifetime (default: estimated)"
    )
    parser.add_argument("--grace", type=float, default=30.0, help="seconds to wait for final states")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--clients", type=int, default=2, help="client processes holding the tabs")
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--modes", default="current,baseline")
    parser.add_argument("--keep-db", action="store_true", help="keep the database for inspection")
    parser.add_argument("--profile", action="store_true", help="cProfile each Daphne's event loop")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    args = parser.parse_args()
    logs = args.logs or Path(os.environ.get("TMPDIR", "/tmp")) / f"fanout-{secrets.token_hex(4)}"
    logs.mkdir(parents=True, exist_ok=True)
    results = []
    for mode in args.modes.split(","):
        print(
            f"[{mode}] {args.tabs} tabs on {args.daphne} Daphne, {args.rate:g} changes/s "
            f"for {args.seconds:g} s (logs in {logs})",
            flush=True,
        )
        result = run_mode(args, mode, logs)
        print(json.dumps(result), flush=True)
        results.append(result)
    print()
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def daphne_main(argv: list[str]) -> None:
    """`fanout.py daphne [--baseline] -- <daphne arguments>`: Daphne, optionally with the shared
    render replaced by a render per socket (the baseline)."""
    baseline = "--baseline" in argv
    unbatched = "--unbatched" in argv
    argv = argv[argv.index("--") + 1 :] if "--" in argv else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    if unbatched or baseline:
        import django

        django.setup()
        from functools import partial

        from tasksapp.live import fanout, rooms, shared

        async def render_each(group: Any, items: Any, renderer: Any) -> dict[Any, Any]:
            """Each row its own database step, as on main before the batches."""

            def one(item: Any) -> Any:
                return renderer([item]).get(item)

            return {item: await shared.render((group, item), at, partial(one, item)) for item, at in items}

        fanout.render_many = render_each
        rooms.until_tick = lambda period: period
    if baseline:
        import django

        django.setup()
        from tasksapp.lib.connections import database_sync_to_async
        from tasksapp.live import shared
        from tasksapp.metrics import live_counts

        async def render_per_socket(
            key: Any, not_before: float, fn: Any, *, thread_sensitive: bool = True
        ) -> Any:
            live_counts["renders"] += 1
            return await database_sync_to_async(fn, thread_sensitive=thread_sensitive)()

        shared.render = render_per_socket
    from daphne.cli import CommandLineInterface

    sys.argv = ["daphne", *argv]
    profile_to = os.environ.get("FANOUT_PROFILE")
    if not profile_to:
        CommandLineInterface.entrypoint()
        return
    import cProfile

    profiler = cProfile.Profile()  # the event loop's thread only (renders run in database threads)
    profiler.enable()
    try:
        CommandLineInterface.entrypoint()
    finally:
        profiler.disable()
        profiler.dump_stats(f"{profile_to}.{os.getpid()}")


if __name__ == "__main__":
    main()
