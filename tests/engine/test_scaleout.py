"""Scale-out on real infrastructure: worker processes sharing one PostgreSQL database, and a channel
layer on Redis carrying their changes to another process.

Everything runs as separate processes, as in production: each test gets a fresh PostgreSQL database
(not pytest-django's SQLite one; a clone of a migrated template, tests/support/stack.py) driven through
manage.py subprocesses. The test process only reads rows (psycopg), the demoserver's record of who
polled what, and the channel layer.
"""

import asyncio
import json
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.peers.launch import ROOT, RunningPeer, demoserver_argv, running
from tests.support.stack import env_for, manage, postgres_database, sql, wait_until

REDIS = "redis://127.0.0.1:6379"
DEMO_READY = "demoserver listening on"
LEASE_SECONDS = 5
TASKS = 200
FOREVER = {"delay": 30, "poll_interval_ms": 250}

# One subprocess starts every task (a `manage.py call` each would take ~1 s apiece); it prints
# {pk: remote task id} so the test can match the demoserver's record to the database's rows.
START_TASKS = """
import json
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name={server!r})
started = {{}}
for _ in range({count}):
    task = services.call_start(server=server, tool={tool!r}, arguments={arguments!r}, user=None).task
    started[task.pk] = task.remote_id
services.server_update(server=server, url=server.url, headers=None, enabled={enabled}, user=None)
print("STARTED " + json.dumps(started))
"""
ENABLE = """
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name={server!r})
services.server_update(server=server, url=server.url, headers=None, enabled=True, user=None)
"""


# --- infrastructure -------------------------------------------------------------------------------


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test only (a clone of the migrated template)."""
    with postgres_database("scaleout") as url:
        yield url


@pytest.fixture
def demo() -> Iterator[RunningPeer]:
    """A demoserver of this test's own, so its record of pollers holds this test's polls only."""
    with running("scaleout-demo", demoserver_argv("--poll-interval-ms", "250"), DEMO_READY) as peer:
        yield peer


class Fleet:
    """Worker processes with their output in files; shown on failure, all stopped at teardown."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, env: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
        with open(self.logs / f"worker-{name}.log", "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "worker", "--name", name, *extra],
                cwd=ROOT,
                env={**env, "MCP_LEASE_SECONDS": str(LEASE_SECONDS)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes[name] = process
        return process

    def stop(self, name: str, signum: int = signal.SIGTERM) -> int:
        process = self.processes[name]
        if process.poll() is None:
            process.send_signal(signum)
        try:
            return process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"worker {name} ignored signal {signum} for 20 s\n{self.output()}") from None

    def output(self) -> str:
        return "".join(
            f"\n--- worker {name} (exit {process.poll()}) ---\n"
            + (self.logs / f"worker-{name}.log").read_text(errors="replace")[-6000:]
            for name, process in self.processes.items()
        )

    def close(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is None:
                with suppress(AssertionError):
                    self.stop(name)
        print(self.output())  # pytest shows it when the test failed


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    workers = Fleet(tmp_path)
    try:
        yield workers
    finally:
        workers.close()


def query(database_url: str, statement: str) -> list[tuple[Any, ...]]:
    return sql(database_url, statement)


# --- what the test observes -----------------------------------------------------------------------


def agent(worker: str) -> str:
    return f"mcp-tasks-dashboard/0.1 worker/{worker}"


def leases(database_url: str) -> dict[str, int]:
    """Active tasks per lease holder ('' for nobody)."""
    rows = query(
        database_url,
        "SELECT leased_by, count(*) FROM tasksapp_remotetask "
        "WHERE status NOT IN ('completed', 'failed', 'cancelled') GROUP BY leased_by",
    )
    return {holder: count for holder, count in rows}


def holders(database_url: str) -> dict[int, str]:
    return dict(query(database_url, "SELECT id, leased_by FROM tasksapp_remotetask"))


def live_workers(database_url: str) -> set[str]:
    rows = query(
        database_url,
        "SELECT worker FROM tasksapp_workerheartbeat WHERE stopped_at IS NULL "
        f"AND last_beat_at > now() - interval '{LEASE_SECONDS} seconds'",
    )
    return {worker for (worker,) in rows}


def explain(database_url: str, fleet: Fleet) -> Callable[[], str]:
    return lambda: f"leases {leases(database_url)}\n{database_state(database_url)}{fleet.output()}"


def database_state(database_url: str) -> str:
    """What the workers wrote and what the database is waiting on, for a failure message."""
    beats = query(
        database_url,
        "SELECT worker, round(extract(epoch FROM now() - last_beat_at)::numeric, 1), stopped_at IS NOT NULL "
        "FROM tasksapp_workerheartbeat ORDER BY worker",
    )
    lapse = query(
        database_url,
        "SELECT leased_by, round(extract(epoch FROM min(lease_until) - now())::numeric, 1), "
        "round(extract(epoch FROM max(lease_until) - now())::numeric, 1) FROM tasksapp_remotetask "
        "GROUP BY leased_by ORDER BY leased_by",
    )
    waiting = query(
        database_url,
        "SELECT state, wait_event_type, left(query, 80) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'",
    )
    return (
        f"heartbeats (worker, seconds since, stopped): {beats}\n"
        f"leases (holder, seconds to the first and last lapse): {lapse}\n"
        f"busy sessions (state, waiting on, query): {waiting}"
    )


def pollers(peer: RunningPeer) -> dict[str, dict[str, int]]:
    """{remote task id: {User-Agent: tasks/get count}} since the last clear."""
    return dict(httpx.get(f"{peer.base}/_debug/pollers", timeout=10).json())


def register(env: dict[str, str], peer: RunningPeer) -> None:
    manage(env, "servers", "add", "demo", peer.url, "--json")


def start_tasks(
    env: dict[str, str], count: int, tool: str, arguments: dict[str, Any], *, then_disable: bool = False
) -> dict[int, str]:
    """Start `count` tasks on the demo server; with then_disable, its tasks then wait for enable()."""
    script = START_TASKS.format(
        server="demo", count=count, tool=tool, arguments=arguments, enabled=not then_disable
    )
    output = manage(env, "shell", "-c", script)
    [line] = [line for line in output.splitlines() if line.startswith("STARTED ")]
    return {int(pk): remote_id for pk, remote_id in json.loads(line.removeprefix("STARTED ")).items()}


def enable(env: dict[str, str]) -> None:
    manage(env, "shell", "-c", ENABLE.format(server="demo"))


def listed_statuses(env: dict[str, str]) -> Counter[str]:
    return Counter(row["status"] for row in json.loads(manage(env, "tasks", "list", "--json")))


def start_pair_sharing_tasks(database_url: str, peer: RunningPeer, fleet: Fleet) -> dict[int, str]:
    """Workers A and B (polling only, so every change is seen through tasks/get) sharing 200 tasks.

    A worker takes its fair share when it claims, counting the workers alive at that moment, so the
    tasks wait on a disabled server until both workers are up; then both race for all 200 at once.
    """
    env = env_for(database_url)
    register(env, peer)
    started = start_tasks(env, TASKS, "run_forever", FOREVER, then_disable=True)
    assert len(started) == TASKS
    for name in ("A", "B"):
        fleet.start(name, env, "--no-listen")
    wait_until(lambda: live_workers(database_url) == {"A", "B"}, 30, fleet.output)
    assert leases(database_url) == {"": TASKS}
    enable(env)
    wait_until(
        lambda: sum(leases(database_url).get(name, 0) for name in ("A", "B")) == TASKS,
        15,
        explain(database_url, fleet),
    )
    return started


# --- the tests ------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_two_workers_on_postgres_share_200_tasks_and_never_poll_the_same_task(
    database: str, demo: RunningPeer, fleet: Fleet
) -> None:
    started = start_pair_sharing_tasks(database, demo, fleet)
    assert listed_statuses(env_for(database)) == {"working": TASKS}
    demo.clear()
    time.sleep(5)  # 20 poll intervals
    polled = pollers(demo)
    held = holders(database)

    assert set(polled) == set(started.values()), f"{len(polled)} tasks polled{fleet.output()}"
    by_more_than_one = {remote: agents for remote, agents in polled.items() if len(agents) != 1}
    assert not by_more_than_one, f"tasks polled by several workers: {by_more_than_one}"
    polled_by = {pk: next(iter(polled[remote])) for pk, remote in started.items()}
    assert polled_by == {pk: agent(held[pk]) for pk in started}  # each by the worker holding its lease
    shares = Counter(polled_by.values())
    assert set(shares) == {agent("A"), agent("B")} and min(shares.values()) >= 50, shares
    assert set(leases(database)) == {"A", "B"}

    assert fleet.stop("A") == 0 and fleet.stop("B") == 0, fleet.output()
    assert leases(database) == {"": TASKS}  # a clean stop hands every lease back
    assert live_workers(database) == set()


@pytest.mark.postgres
def test_a_killed_workers_tasks_move_to_the_survivor(database: str, demo: RunningPeer, fleet: Fleet) -> None:
    started = start_pair_sharing_tasks(database, demo, fleet)
    assert min(leases(database).get(name, 0) for name in ("A", "B")) >= 50, leases(database)

    assert fleet.stop("A", signal.SIGKILL) == -signal.SIGKILL
    assert leases(database).get("A"), "a killed worker cannot release its leases"
    # A's leases and heartbeat both go stale after LEASE_SECONDS; B claims on its next refresh.
    wait_until(
        lambda: leases(database) == {"B": TASKS},
        LEASE_SECONDS * 2 + 5,
        explain(database, fleet),
    )
    demo.clear()
    wait_until(lambda: set(pollers(demo)) == set(started.values()), 15, explain(database, fleet))
    polled = pollers(demo)

    assert set(polled) == set(started.values()), f"{len(polled)} tasks polled{fleet.output()}"
    assert {agent_ for agents in polled.values() for agent_ in agents} == {agent("B")}
    assert fleet.stop("B") == 0, fleet.output()


@pytest.mark.postgres
def test_a_frozen_workers_tasks_move_to_the_survivor_and_it_polls_none_of_them_anew_when_it_thaws(
    database: str, demo: RunningPeer, fleet: Fleet
) -> None:
    """A worker starved past its leases (SIGSTOP here; a saturated machine in CI) must not go on polling
    tasks another worker has taken meanwhile: it renews first, and polls only what is its own again
    (the survivor hands part of the work back once the thawed worker beats: those it may poll)."""
    started = start_pair_sharing_tasks(database, demo, fleet)
    frozen = fleet.processes["A"]
    frozen.send_signal(signal.SIGSTOP)
    try:
        held_by_a = (
            "SELECT count(*) FROM tasksapp_remotetask WHERE leased_by = 'A' AND NOT expired "
            "AND status NOT IN ('completed', 'failed', 'cancelled')"
        )
        wait_until(
            lambda: query(database, held_by_a) == [(0,)],
            LEASE_SECONDS * 3 + 5,
            explain(database, fleet),
        )
        demo.clear()
    finally:
        frozen.send_signal(signal.SIGCONT)
    time.sleep(3)  # 12 poll intervals: a thawed worker that trusted its old leases polls at once
    polled = pollers(demo)
    held = holders(database)

    by_a = {pk for pk, remote in started.items() if agent("A") in polled.get(remote, {})}
    assert polled, f"nothing polled{fleet.output()}"
    # A poll the frozen worker had begun sending when it stopped reaches the server after the thaw
    # (a read-only tasks/get, once): as many as were between their lease check and the wire, a few
    # (2 in CI7, 6 on a machine loaded by three test runs). A worker that trusted its old leases
    # polls its whole former share (about TASKS / 2, 100 here) at once.
    stale = {pk: polled[started[pk]][agent("A")] for pk in by_a if held[pk] != "A"}
    assert len(stale) <= TASKS // 10 and set(stale.values()) <= {1}, (
        f"polled by A, held by B: {stale}{fleet.output()}"
    )
    assert fleet.stop("A") == 0 and fleet.stop("B") == 0, fleet.output()


STALL_IN_TRANSACTION = """
import time
from django.db import transaction
from tasksapp.models import RemoteTask
with transaction.atomic():
    RemoteTask.objects.select_for_update().get(pk={pk})
    print("LOCKED", flush=True)
    time.sleep(60)
"""


@pytest.mark.postgres
def test_a_process_stalled_in_a_transaction_keeps_no_task_from_the_workers_beyond_one_lease(
    database: str, demo: RunningPeer, fleet: Fleet
) -> None:
    """A process frozen while it holds a task's row lock (SIGSTOP, a paused VM, a starved machine:
    the drill above met it) would keep that task from every worker, since a claim skips locked
    rows: PostgreSQL ends a transaction idle for one lease (DATABASE_IDLE_IN_TRANSACTION_SECONDS)."""
    env = env_for(database, MCP_LEASE_SECONDS=str(LEASE_SECONDS))
    register(env, demo)
    [pk] = start_tasks(env, 1, "run_forever", FOREVER, then_disable=True)
    stalled = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", STALL_IN_TRANSACTION.format(pk=pk)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert stalled.stdout is not None and stalled.stdout.readline().strip() == "LOCKED"
        enable(env)
        fleet.start("B", env, "--no-listen")
        # A claim skips locked rows: B holds the task only once PostgreSQL has ended that session.
        wait_until(lambda: leases(database) == {"B": 1}, LEASE_SECONDS * 2 + 5, explain(database, fleet))
    finally:
        stalled.kill()
        stalled.wait()
    assert fleet.stop("B") == 0, fleet.output()


@pytest.mark.postgres
def test_a_worker_started_later_takes_a_share_of_the_running_tasks(
    database: str, demo: RunningPeer, fleet: Fleet
) -> None:
    env = env_for(database)
    register(env, demo)
    started = start_tasks(env, 40, "run_forever", FOREVER)
    fleet.start("A", env, "--no-listen")
    wait_until(lambda: leases(database) == {"A": 40}, 30, explain(database, fleet))

    fleet.start("B", env, "--no-listen")  # scaling out while the work is already running
    wait_until(
        lambda: (
            sum(leases(database).get(name, 0) for name in ("A", "B")) == 40
            and min(leases(database).get(name, 0) for name in ("A", "B")) >= 15
        ),
        LEASE_SECONDS * 3,
        explain(database, fleet),
    )
    demo.clear()
    wait_until(lambda: set(pollers(demo)) == set(started.values()), 15, explain(database, fleet))
    polled = pollers(demo)

    assert set(polled) == set(started.values()), f"{len(polled)} tasks polled{fleet.output()}"
    assert all(len(agents) == 1 for agents in polled.values()), polled
    assert fleet.stop("A") == 0 and fleet.stop("B") == 0, fleet.output()


@pytest.mark.postgres
@pytest.mark.redis
async def test_a_web_process_receives_the_workers_changes_through_redis(
    database: str, demo: RunningPeer, fleet: Fleet
) -> None:
    from channels_redis.core import RedisChannelLayer

    # A Redis database and task ids of its own, so a concurrent run's messages cannot pass for ours.
    redis_url = f"{REDIS}/{secrets.randbelow(15) + 1}"
    first_id = secrets.randbelow(10**9) + 1000
    query(database, f"ALTER SEQUENCE tasksapp_remotetask_id_seq RESTART WITH {first_id}")
    layer = RedisChannelLayer(hosts=[redis_url])  # this process: a web process, not the worker
    channel = await joined(layer, "tasks")
    try:
        # Only the worker publishes to Redis: the commands below use the in-memory layer.
        env = env_for(database)
        register(env, demo)
        fleet.start("W", env_for(database, REDIS_URL=redis_url))
        wait_until(lambda: live_workers(database) == {"W"}, 30, fleet.output)
        called = manage(env, "call", "demo", "slow_count", '{"n": 4, "delay": 1}', "--json")
        task = json.loads(called)["task"]

        seen = await changes_until_completed(layer, channel, database, task["id"], fleet)
    finally:
        await layer.group_discard("tasks", channel)
        await layer.close_pools()

    assert all((message["type"], message["id"]) == ("task.changed", task["id"]) for message, _ in seen), seen
    statuses = [status for _, status in seen]
    assert statuses[0] == "working" and statuses[-1] == "completed", statuses
    assert fleet.stop("W") == 0, fleet.output()


async def joined(layer: Any, group: str) -> str:
    from redis.exceptions import RedisError

    channel = str(await layer.new_channel())
    try:
        await layer.group_add(group, channel)
    except (OSError, RedisError) as exc:
        pytest.fail(
            f"Redis is not reachable at {REDIS} ({exc}). The channel-layer test needs it: "
            "start Redis on 127.0.0.1:6379.",
            pytrace=False,
        )
    return channel


async def changes_until_completed(
    layer: Any, channel: str, database_url: str, pk: int, fleet: Fleet, timeout: float = 30
) -> list[tuple[dict[str, Any], str]]:
    """This task's messages, each with the status the row has when it arrives, up to `completed`."""
    seen: list[tuple[dict[str, Any], str]] = []
    deadline = time.monotonic() + timeout
    while not seen or seen[-1][1] != "completed":
        try:
            message = await asyncio.wait_for(layer.receive(channel), max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            problem = f"no message after completion; the task is {task_status(database_url, pk)}; saw {seen}"
            raise AssertionError(problem + fleet.output()) from None
        if message.get("id") == pk:  # else another run that picked the same Redis database
            seen.append((message, task_status(database_url, pk)))
    return seen


def task_status(database_url: str, pk: int) -> str:
    [(status,)] = query(database_url, f"SELECT status FROM tasksapp_remotetask WHERE id = {pk}")
    return str(status)
