"""Fault drills on PostgreSQL: the production layout in processes (tests/stack.py), each fault
injected as it happens in production, each drill asserting that nothing is lost, nothing is sent
twice, and the mirror catches up within a stated bound.

Bounds are generous multiples of what the drills take on an idle machine, because other people's
tests share its two cores; each is stated next to its assertion.
"""

import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.faults import ScriptedServer
from tests.peers.launch import RunningPeer, demoserver_argv, running
from tests.stack import (
    Processes,
    connections_to,
    create_operator,
    env_for,
    login,
    manage,
    postgres_database,
    private_redis,
    process_group,
    sql,
    terminate_backends,
    wait_until,
    websocket_headers,
    websocket_url,
)

pytestmark = pytest.mark.postgres
DEMO_READY = "demoserver listening on"
START = """
import json, sys
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name="demo")
started = {}
for tool, count, arguments in json.loads(sys.argv[-1]):
    for _ in range(count):
        task = services.call_start(server=server, tool=tool, arguments=arguments, user=None).task
        started[task.pk] = task.remote_id
print("STARTED " + json.dumps(started))
"""


@pytest.fixture
def database() -> Iterator[str]:
    with postgres_database("faults") as url:
        yield url


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    with process_group(tmp_path) as group:
        yield group


@pytest.fixture
def demo() -> Iterator[RunningPeer]:
    with running("faults-demo", demoserver_argv("--poll-interval-ms", "200"), DEMO_READY) as peer:
        yield peer


def start_tasks(env: dict[str, str], *plan: tuple[str, int, dict[str, Any]]) -> dict[int, str]:
    """Start tasks in one subprocess (a `manage.py call` each costs a second); {pk: remote id}."""
    output = manage(
        {**env, "START_PLAN": json.dumps(plan)},
        "shell",
        "-c",
        START.replace("sys.argv[-1]", "__import__('os').environ['START_PLAN']"),
    )
    [line] = [line for line in output.splitlines() if line.startswith("STARTED ")]
    return {int(pk): remote for pk, remote in json.loads(line.removeprefix("STARTED ")).items()}


def statuses(database: str) -> Counter[str]:
    return Counter(status for (status,) in sql(database, "SELECT status FROM tasksapp_remotetask"))


def updates_per_key(peer: RunningPeer) -> Counter[str]:
    return Counter(
        key
        for request in peer.received()
        if request["method"] == "tasks/update"
        for key in request["body"]["params"]["inputResponses"]
    )


ANSWER_ALL = """
from tasksapp import services
from tasksapp.models import InputRequest
answered = 0
for request in InputRequest.objects.filter(state="open").select_related("task"):
    services.task_answer(task=request.task, key=request.key, response={"action": "decline"}, user=None)
    answered += 1
print(f"ANSWERED {answered}")
"""


def answer_open_requests(env: dict[str, str]) -> int:
    """Decline every open question through the services, as the answer form does."""
    output = manage(env, "shell", "-c", ANSWER_ALL)
    return int(output.rsplit("ANSWERED ", 1)[1].split()[0])


class PageLoads:
    """Logged-in page loads in a loop, recording (started, status) for every one."""

    def __init__(self, base: str, cookies: httpx.Cookies) -> None:
        self.client = httpx.Client(base_url=base, cookies=cookies, timeout=60)
        self.results: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in ("/", "/tasks/", "/servers/"):
                started = time.monotonic()
                try:
                    status = self.client.get(path).status_code
                except httpx.HTTPError:
                    status = 0
                self.results.append((started, status))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def failures(self, between: tuple[float, float] = (0.0, float("inf"))) -> list[tuple[float, int]]:
        return [(t, s) for t, s in self.results if between[0] <= t < between[1] and s != 200]


class Frames:
    """A websocket of a page, recording the monotonic time of every frame it receives."""

    def __init__(self, base: str, client: httpx.Client, page: str) -> None:
        from websockets.sync.client import connect

        self.times: list[float] = []
        self.closed: str | None = None
        self.socket = connect(websocket_url(base, page), additional_headers=websocket_headers(base, client))
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            for _ in self.socket:
                self.times.append(time.monotonic())
        except ConnectionClosed as exc:
            self.closed = str(exc)
        else:
            self.closed = "closed"

    def since(self, moment: float) -> int:
        return sum(1 for t in self.times if t >= moment)

    def close(self) -> None:
        self.socket.close()


# --- the drills -----------------------------------------------------------------------------------


@pytest.mark.redis
def test_worker_and_daphne_survive_a_database_restart(
    database: str, demo: RunningPeer, processes: Processes, tmp_path: Path
) -> None:
    """Every connection of the worker and of Daphne is cut five times in four seconds, and for three
    seconds no connection is possible at all, as during a PostgreSQL restart."""
    with private_redis(tmp_path) as redis:
        env = env_for(database, REDIS_URL=redis.url, MCP_LEASE_SECONDS="10", DATABASE_POOL_SIZE="4")
        manage(env, "servers", "add", "demo", demo.url)
        create_operator(env)
        base = processes.daphne("daphne", env)
        processes.worker("W", env, "--no-listen")  # every change then travels by tasks/get
        client = login(base)
        overview = Frames(base, client, "overview")
        started = start_tasks(
            env,
            ("slow_count", 6, {"n": 40, "delay": 0.25}),  # 10 s: counting all through the drill
            ("run_forever", 1, {"delay": 30}),  # cancelled after the last cut
            ("ask_form", 4, {"delay": 0.2}),
        )
        wait_until(lambda: statuses(database)["input_required"] == 4, 30, lambda: f"{statuses(database)}")
        pages = PageLoads(base, client.cookies)
        demo.clear()

        kills = 0
        for round_ in range(5):
            kills += terminate_backends(database)
            if round_ == 1:  # the operator answers while connections are being cut
                assert answer_open_requests(env) == 4
            if round_ == 2:  # the restart itself: nobody can connect for three seconds
                sql_admin(f"ALTER DATABASE {name_of(database)} ALLOW_CONNECTIONS false")
                kills += terminate_backends(database)
                outage = time.monotonic()
                time.sleep(3)
                sql_admin(f"ALTER DATABASE {name_of(database)} ALLOW_CONNECTIONS true")
                back = time.monotonic()
            time.sleep(0.5)
        last_kill = time.monotonic()
        assert kills >= 10, "the worker and Daphne should have held connections to cut"
        [(forever,)] = sql(database, "SELECT id FROM tasksapp_remotetask WHERE tool_name = 'run_forever'")
        manage(env, "tasks", "cancel", str(forever))  # a change after the last cut, for the overview
        # Bound: 20 s after the last cut for every task to be seen completed (the counts end about
        # 10 s after they started; the answered forms within a poll).
        took = wait_until(
            lambda: statuses(database) == {"completed": len(started) - 1, "cancelled": 1},
            20,
            lambda: f"{statuses(database)}{processes.output()}",
        )
        pages.stop()
        overview_frames_after = overview.since(last_kill)
        overview.close()
        assert processes.running["worker-W"].poll() is None, processes.output()
        assert processes.stop("worker-W") == 0 and processes.stop("daphne") == 0, processes.output()

    assert set(updates_per_key(demo).values()) == {1}, updates_per_key(demo)  # nothing sent twice
    assert sql(database, "SELECT count(*) FROM tasksapp_remotetask")[0][0] == len(started)  # nothing lost
    assert not sql(database, "SELECT id FROM tasksapp_remotetask WHERE expired")
    # Page loads: none failed while connections were cut (outside the three seconds when no
    # connection could be made at all), and none failed once the database was back.
    cut_only = pages.failures((0, outage)) + pages.failures((back + 1, float("inf")))
    assert cut_only == [], cut_only
    assert len(pages.results) > 50
    # The overview's live refresh (on Daphne's pool threads) kept working after the cuts.
    assert overview_frames_after >= 1, (
        f"the overview received no update after the last cut ({len(overview.times)} frames in all, "
        f"closed: {overview.closed})"
    )
    assert overview.closed in (None, "closed") or "1000" in str(overview.closed), overview.closed
    print(
        f"caught up {took:.1f} s after the last cut; {len(pages.results)} page loads, "
        f"{len(pages.failures((outage, back + 1)))} failed while no connection was possible"
    )


def test_a_worker_restarted_under_the_same_name_polls_its_tasks_at_once(
    database: str, demo: RunningPeer, processes: Processes
) -> None:
    env = env_for(database, MCP_LEASE_SECONDS="30")
    manage(env, "servers", "add", "demo", demo.url)
    started = start_tasks(env, ("run_forever", 20, {"delay": 30, "poll_interval_ms": 250}))
    processes.worker("W", env, "--no-listen")
    wait_until(lambda: holders(database) == {"W": 20}, 30, processes.output)
    assert processes.stop("worker-W", signal.SIGKILL) == -signal.SIGKILL
    processes.worker("W", env, "--no-listen")  # a supervisor restarting it at once
    demo.clear()
    # Bound: every task polled again within 15 s of the restart (the process itself takes a few
    # seconds to start), well inside the 30 s lease the dead process left behind.
    took = wait_until(
        lambda: set(pollers(demo)) == set(started.values()),
        15,
        lambda: f"{len(pollers(demo))} of 20 polled{processes.output()}",
    )
    assert holders(database) == {"W": 20}
    assert processes.stop("worker-W") == 0, processes.output()
    assert holders(database) == {"": 20}  # nothing stranded: a clean stop hands every lease back
    print(f"all 20 tasks polled {took:.1f} s after the restart")


def test_a_worker_that_cannot_write_backs_off_and_catches_up(
    database: str, demo: RunningPeer, processes: Processes
) -> None:
    env = env_for(database)
    manage(env, "servers", "add", "demo", demo.url)
    [remote] = start_tasks(env, ("slow_count", 1, {"n": 300, "delay": 0.2})).values()  # a change per poll
    processes.worker("W", env, "--no-listen")
    wait_until(lambda: "/300" in message_of(database) and polled(database), 30, processes.output)
    sql_admin(f"ALTER DATABASE {name_of(database)} SET default_transaction_read_only = on")
    terminate_backends(database)  # new connections cannot write: every poll's change fails to land
    demo.clear()
    time.sleep(8)  # the window over which polls are counted
    polls_while_read_only = sum(pollers(demo).get(remote, {}).values())
    sql_admin(f"ALTER DATABASE {name_of(database)} RESET default_transaction_read_only")
    terminate_backends(database)
    stale = message_of(database)
    # Bound: the mirror moves again within 10 s of the database taking writes again.
    took = wait_until(lambda: message_of(database) != stale, 10, processes.output)
    assert processes.running["worker-W"].poll() is None
    # It waited (at most 5 s apart) instead of re-polling every 200 ms, or every second as before.
    assert 1 <= polls_while_read_only <= 4, polls_while_read_only
    print(f"{polls_while_read_only} polls in 8 s without writes; caught up {took:.1f} s after")


def polled(database: str) -> bool:
    return sql(database, "SELECT last_seen_via FROM tasksapp_remotetask")[0][0] == "poll"


def message_of(database: str) -> str:
    return str(sql(database, "SELECT status_message FROM tasksapp_remotetask")[0][0])


def test_a_database_loss_during_tools_call_still_mirrors_the_task(database: str, demo: RunningPeer) -> None:
    env = env_for(database)
    manage(env, "servers", "add", "demo", demo.url)
    with cutting_proxy(demo, lambda: terminate_backends(database)) as proxy:
        sql(database, "UPDATE tasksapp_mcpserver SET url = %s", proxy.url())
        output = manage(env, "call", "demo", "slow_count", '{"n": 2, "delay": 0.2}', "--json")
    assert proxy.cuts == 1  # the fault really hit: the caller's connection died mid-call
    task = json.loads(output)["task"]
    rows = sql(database, "SELECT id, tool_name FROM tasksapp_remotetask")
    assert rows == [(task["id"], "slow_count")]
    assert demo.method_counts().get("tools/call") == 1  # the write was retried, not the call
    audit = sql(database, "SELECT action, ok, task_id FROM tasksapp_operatoraction WHERE action = 'start'")
    assert audit == [("start", True, task["id"])]


def test_a_database_that_stays_away_during_tools_call_is_reported_with_the_task_id(
    database: str, demo: RunningPeer
) -> None:
    env = env_for(database, DATABASE_POOL_TIMEOUT="1")
    manage(env, "servers", "add", "demo", demo.url)

    def database_goes_away() -> int:
        sql_admin(f"ALTER DATABASE {name_of(database)} ALLOW_CONNECTIONS false")
        return terminate_backends(database)

    try:
        with cutting_proxy(demo, database_goes_away) as proxy:
            sql(database, "UPDATE tasksapp_mcpserver SET url = %s", proxy.url())
            output = manage(env, "call", "demo", "slow_count", '{"n": 2, "delay": 0.2}', check=False)
    finally:
        sql_admin(f"ALTER DATABASE {name_of(database)} ALLOW_CONNECTIONS true")
    assert demo.method_counts().get("tools/call") == 1
    [remote_id] = proxy.task_ids
    assert remote_id in output and "Do not run the tool again" in output, output
    assert sql(database, "SELECT count(*) FROM tasksapp_remotetask") == [(0,)]
    # Once the database is back, the operator adds it with the id the error gave.
    sql(database, "UPDATE tasksapp_mcpserver SET url = %s", demo.url)
    adopted = json.loads(manage(env, "tasks", "adopt", "demo", remote_id, "--tool", "slow_count", "--json"))
    assert adopted["taskId"] == remote_id and adopted["tool"] == "slow_count"
    assert demo.method_counts().get("tools/call") == 1


def test_twenty_concurrent_users_get_no_errors_with_a_bounded_connection_count(
    database: str, processes: Processes
) -> None:
    env = env_for(database, DATABASE_POOL_SIZE="8")
    create_operator(env)
    base = processes.daphne("daphne", env)
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, connections_to(database))
            time.sleep(0.05)

    # Twenty browsers at once, each with its own connections (one login shared: a login costs a
    # second of password hashing, and the sessions are not what is measured here).
    cookies = login(base).cookies
    clients = [httpx.Client(base_url=base, cookies=cookies, timeout=60) for _ in range(20)]

    def user(client: httpx.Client) -> list[int]:
        return [client.get(path).status_code for _ in range(3) for path in ("/", "/tasks/")]

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with ThreadPoolExecutor(20) as pool:
        codes = [code for codes in pool.map(user, clients) for code in codes]
    stop.set()
    watcher.join()
    for client in clients:
        client.close()
    assert Counter(codes) == {200: 120}, Counter(codes)
    assert peak <= 8, f"{peak} connections for a pool of 8"
    assert connections_to(database) <= 8
    print(f"20 users, 120 concurrent page loads: 0 errors, at most {peak} connections")


# --- helpers --------------------------------------------------------------------------------------


def sql_admin(statement: str) -> None:
    from tests.stack import POSTGRES

    sql(f"{POSTGRES}/postgres", statement)


def name_of(database_url: str) -> str:
    return '"' + database_url.rsplit("/", 1)[1] + '"'


def holders(database: str) -> dict[str, int]:
    rows = sql(database, "SELECT leased_by, count(*) FROM tasksapp_remotetask GROUP BY leased_by")
    return {holder: count for holder, count in rows}


def pollers(peer: RunningPeer) -> dict[str, Any]:
    return dict(httpx.get(f"{peer.base}/_debug/pollers", timeout=10).json())


class CuttingProxy:
    """A forwarding proxy at the network edge that runs `cut` (the fault) once, when the answer to
    a tools/call has arrived from the real server and before it is passed on; it keeps the task id
    the server gave, to compare with what the operator is told."""

    def __init__(self, peer: RunningPeer, cut: Callable[[], object]) -> None:
        self.target = peer.url
        self.cut = cut
        self.cuts = 0
        self.task_ids: list[str] = []
        self.server = ScriptedServer(self._forward, answer_discover=False)

    def url(self) -> str:
        return self.server.url

    async def _forward(self, request: web.Request, message: dict[str, Any]) -> web.Response:
        import asyncio

        import aiohttp

        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.target, json=message, headers=headers) as answer,
        ):
            body = await answer.read()
            status, ctype = answer.status, answer.headers.get("Content-Type", "application/json")
        if message.get("method") == "tools/call":
            self.task_ids += re.findall(r'"taskId":\s*"([^"]+)"', body.decode())
            if not self.cuts:
                self.cuts += 1
                await asyncio.get_running_loop().run_in_executor(None, self.cut)
        return web.Response(body=body, status=status, headers={"Content-Type": ctype})

    def close(self) -> None:
        self.server.close()


@contextmanager
def cutting_proxy(peer: RunningPeer, cut: Callable[[], object]) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(peer, cut)
    try:
        yield proxy
    finally:
        proxy.close()
