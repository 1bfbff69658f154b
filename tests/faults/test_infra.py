"""Fault drills on the production layout: PostgreSQL, Redis, Daphne and worker processes, the
reference MCP server (tests/support/stack.py, tests/support/drills.py). Each fault is injected as
it happens in production, on this module's own database and its own redis-server, and each drill
asserts that nothing is lost, nothing is sent twice, and the mirror catches up within a stated bound.

The drills share one stack (one database, one Daphne, one Redis) and run in file order, each from
a clean slate of tasks; a websocket opened when the stack comes up is checked by the last drills:
it must have lived through a minute of mostly silence. Bounds are generous multiples of what
the drills take on an idle machine, because other people's tests share its two cores.
"""

import asyncio
import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidMessage

from tests.peers.launch import RunningPeer, demoserver_argv, running
from tests.support.drills import (
    Frames,
    PageLoads,
    answer_open_requests,
    cutting_proxy,
    holders,
    message_of,
    name_of,
    polled,
    pollers,
    reset,
    sql_admin,
    start_tasks,
    statuses,
    updates_per_key,
)
from tests.support.stack import (
    PrivateRedis,
    Processes,
    connections_to,
    create_operator,
    env_for,
    lock_waiters,
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

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
DEMO_READY = "demoserver listening on"
POOL_SIZE = 6
QUIET_SECONDS = 60
SOCKETS = 500


@dataclass
class Stack:
    database: str
    env: dict[str, str]
    demo: RunningPeer
    redis: PrivateRedis
    base: str
    cookies: httpx.Cookies
    quiet: Frames  # opened with the stack, checked by the last drills
    quiet_since: float
    daphne: Processes


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("faults")
    demo_argv = demoserver_argv("--poll-interval-ms", "200")
    with (
        postgres_database("faults") as database,
        private_redis(logs) as redis,
        running("faults-demo", demo_argv, DEMO_READY) as demo,
        process_group(logs) as daphne,
    ):
        env = env_for(
            database, REDIS_URL=redis.url, DATABASE_POOL_SIZE=str(POOL_SIZE), MCP_LEASE_SECONDS="30"
        )
        manage(env, "servers", "add", "demo", demo.url)
        create_operator(env)
        base = daphne.daphne("daphne", env)
        client = login(base)
        quiet = Frames(base, client, "servers")
        yield Stack(database, env, demo, redis, base, client.cookies, quiet, time.monotonic(), daphne)
        quiet.close()


@pytest.fixture
def processes(stack: Stack, tmp_path: Path) -> Iterator[Processes]:
    reset(stack.database, stack.demo)
    with process_group(tmp_path) as group:
        yield group


def test_twenty_concurrent_users_get_no_errors_with_a_bounded_connection_count(
    stack: Stack, processes: Processes
) -> None:
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, connections_to(stack.database))
            time.sleep(0.05)

    # Twenty browsers at once, each with connections of its own (one login shared: a login costs a
    # second of password hashing, and the sessions are not what is measured here).
    clients = [httpx.Client(base_url=stack.base, cookies=stack.cookies, timeout=60) for _ in range(20)]

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
    # Daphne alone uses the database here: never more connections than its pool holds (before the
    # pool, every request thread kept one of its own: 97 for this drill).
    assert peak <= POOL_SIZE, f"{peak} connections for a pool of {POOL_SIZE}"
    print(f"20 users, 120 concurrent page loads: 0 errors, at most {peak} connections")


def test_a_database_loss_during_tools_call_still_mirrors_the_task(stack: Stack, processes: Processes) -> None:
    with cutting_proxy(stack.demo, lambda: terminate_backends(stack.database)) as proxy:
        sql(stack.database, "UPDATE tasksapp_mcpserver SET url = %s", proxy.url())
        output = manage(stack.env, "call", "demo", "slow_count", '{"n": 2, "delay": 0.2}', "--json")
    assert proxy.cuts == 1  # the fault really hit: the caller's connection died mid-call
    task = json.loads(output)["task"]
    rows = sql(stack.database, "SELECT id, tool_name FROM tasksapp_remotetask")
    assert rows == [(task["id"], "slow_count")]
    assert stack.demo.method_counts().get("tools/call") == 1  # the write was retried, not the call
    audit = "SELECT action, ok FROM tasksapp_operatoraction WHERE task_id = %s"
    assert sql(stack.database, audit, task["id"]) == [("start", True)]


def test_a_database_that_stays_away_during_tools_call_is_reported_with_the_task_id(
    stack: Stack, processes: Processes
) -> None:
    env = {**stack.env, "DATABASE_POOL_TIMEOUT": "1"}

    def database_goes_away() -> int:
        sql_admin(f"ALTER DATABASE {name_of(stack.database)} ALLOW_CONNECTIONS false")
        return terminate_backends(stack.database)

    try:
        with cutting_proxy(stack.demo, database_goes_away) as proxy:
            sql(stack.database, "UPDATE tasksapp_mcpserver SET url = %s", proxy.url())
            output = manage(env, "call", "demo", "slow_count", '{"n": 2, "delay": 0.2}', check=False)
    finally:
        sql_admin(f"ALTER DATABASE {name_of(stack.database)} ALLOW_CONNECTIONS true")
    assert stack.demo.method_counts().get("tools/call") == 1
    [remote_id] = proxy.task_ids
    assert remote_id in output and "Do not run the tool again" in output, output
    assert sql(stack.database, "SELECT count(*) FROM tasksapp_remotetask") == [(0,)]
    # Once the database is back, the operator adds it with the id the error gave.
    sql(stack.database, "UPDATE tasksapp_mcpserver SET url = %s", stack.demo.url)
    adopted = json.loads(manage(env, "tasks", "adopt", "demo", remote_id, "--tool", "slow_count", "--json"))
    assert adopted["taskId"] == remote_id and adopted["tool"] == "slow_count"
    assert stack.demo.method_counts().get("tools/call") == 1


def test_a_worker_restarted_under_the_same_name_polls_its_tasks_at_once(
    stack: Stack, processes: Processes
) -> None:
    started = start_tasks(stack.env, ("run_forever", 20, {"delay": 30, "poll_interval_ms": 250}))
    processes.worker("W", stack.env, "--no-listen")
    wait_until(lambda: holders(stack.database) == {"W": 20}, 30, processes.output)
    assert processes.stop("worker-W", signal.SIGKILL) == -signal.SIGKILL
    processes.worker("W", stack.env, "--no-listen")  # a supervisor restarting it at once
    stack.demo.clear()
    # Bound: every task polled again within 15 s of the restart (the process itself takes a few
    # seconds to start), well inside the 30 s lease the dead process left behind.
    took = wait_until(
        lambda: set(pollers(stack.demo)) == set(started.values()),
        15,
        lambda: f"{len(pollers(stack.demo))} of 20 polled{processes.output()}",
    )
    assert holders(stack.database) == {"W": 20}
    assert processes.stop("worker-W") == 0, processes.output()
    assert holders(stack.database) == {"": 20}  # nothing stranded: a clean stop hands every lease back
    print(f"all 20 tasks polled {took:.1f} s after the restart")


def test_a_worker_that_cannot_write_backs_off_and_catches_up(stack: Stack, processes: Processes) -> None:
    [remote] = start_tasks(stack.env, ("slow_count", 1, {"n": 300, "delay": 0.2})).values()
    processes.worker("W", stack.env, "--no-listen")
    wait_until(lambda: "/300" in message_of(stack.database) and polled(stack.database), 30, processes.output)
    sql_admin(f"ALTER DATABASE {name_of(stack.database)} SET default_transaction_read_only = on")
    try:
        terminate_backends(stack.database)  # new connections cannot write: each poll's change fails
        stack.demo.clear()
        time.sleep(6)  # the window over which polls are counted
        polls_while_read_only = sum(pollers(stack.demo).get(remote, {}).values())
    finally:
        sql_admin(f"ALTER DATABASE {name_of(stack.database)} RESET default_transaction_read_only")
        terminate_backends(stack.database)
    stale = message_of(stack.database)
    # Bound: the mirror moves again within 10 s of the database taking writes again.
    took = wait_until(lambda: message_of(stack.database) != stale, 10, processes.output)
    assert processes.running["worker-W"].poll() is None
    # It waited (at most 5 s apart) instead of re-polling every 200 ms, or every second as before.
    assert 1 <= polls_while_read_only <= 3, polls_while_read_only
    print(f"{polls_while_read_only} polls in 6 s without writes; caught up {took:.1f} s after")


def test_a_page_load_whose_connection_is_cut_twice_is_still_answered(
    stack: Stack, processes: Processes
) -> None:
    """During a restart connections are cut every half second, and a page load on a busy machine
    can lose the fresh connection of its second attempt too. A lock this test holds keeps the
    load waiting in the database until its connection is cut, twice; then it is let through."""
    logged_before = len(stack.daphne.log("daphne"))
    with psycopg.connect(stack.database) as locker:
        locker.execute("LOCK TABLE tasksapp_remotetask IN ACCESS EXCLUSIVE MODE")
        with ThreadPoolExecutor(1) as pool:
            client = httpx.Client(base_url=stack.base, cookies=stack.cookies, timeout=60)
            load = pool.submit(client.get, "/tasks/")
            for cut in range(2):
                waiting = f"before cut {cut + 1}: not waiting for the lock"
                wait_until(lambda: load.done() or lock_waiters(stack.database) == 1, 30, lambda: waiting)  # noqa: B023
                assert not load.done(), f"answered {load.result().status_code} after {cut} cuts"
                assert terminate_backends(stack.database, sparing=locker.info.backend_pid) >= 1
            locker.rollback()
            response = load.result(60)
    assert response.status_code == 200, response.status_code
    assert "ERROR django.request" not in stack.daphne.log("daphne")[logged_before:]


def test_worker_and_daphne_survive_a_database_restart(stack: Stack, processes: Processes) -> None:
    """Every connection of the worker and of Daphne is cut five times in four seconds, and for three
    seconds no connection is possible at all, as during a PostgreSQL restart."""
    database = stack.database
    processes.worker("W", stack.env, "--no-listen")  # every change then travels by tasks/get
    overview = Frames(stack.base, httpx.Client(cookies=stack.cookies), "overview")
    started = start_tasks(
        stack.env,
        ("slow_count", 6, {"n": 40, "delay": 0.25}),  # 10 s: counting all through the drill
        ("ask_form", 4, {"delay": 0.2}),
        ("run_forever", 1, {"delay": 30}),  # cancelled after the last cut
    )
    wait_until(lambda: statuses(database)["input_required"] == 4, 30, lambda: f"{statuses(database)}")
    pages = PageLoads(stack.base, stack.cookies)
    stack.demo.clear()
    logged_before = len(stack.daphne.log("daphne"))

    kills = 0
    cuts: list[float] = []
    for round_ in range(5):
        cuts.append(time.monotonic())
        kills += terminate_backends(database)
        if round_ == 1:  # the operator answers while connections are being cut
            assert answer_open_requests(stack.env) == 4
        if round_ == 2:  # the restart itself: nobody can connect for three seconds
            refused = time.monotonic()
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
    manage(stack.env, "tasks", "cancel", str(forever))  # a change after the last cut, for the overview

    # Bound: 20 s after the last cut for every task to be seen finished (the counts end about 10 s
    # after they started; the answered forms and the cancel within a poll).
    took = wait_until(
        lambda: statuses(database) == {"completed": len(started) - 1, "cancelled": 1},
        20,
        lambda: f"{statuses(database)}{processes.output()}",
    )
    wait_until(lambda: overview.since(last_kill) > 0, 10, lambda: f"overview closed: {overview.closed}")
    # The loads run one after another: one that began during the outage may still be waiting for
    # its connection when the tasks are done, so wait (bounded) for a load begun after it.
    wait_until(
        lambda: any(started >= back + 1 for started, _ in pages.results),
        10,
        lambda: f"page loads since the outage: {[r for r in pages.results if r[0] >= outage]}",
    )
    pages.stop()
    overview.close()

    assert processes.running["worker-W"].poll() is None, processes.output()
    assert set(updates_per_key(stack.demo).values()) == {1}, updates_per_key(stack.demo)  # none twice
    assert sql(database, "SELECT count(*) FROM tasksapp_remotetask") == [(len(started),)]  # none lost
    assert not sql(database, "SELECT id FROM tasksapp_remotetask WHERE expired")
    # Page loads: none failed while connections were cut (outside the three seconds when no
    # connection could be made at all), and none once the database was back.
    cut_only = pages.failures((0, outage)) + pages.failures((back + 1, float("inf")))
    log = stack.daphne.log("daphne")[logged_before:]

    def rel(t: float) -> float:
        return round(t - outage, 2)

    timeline = (
        f"cuts {[rel(c) for c in cuts]} refused {rel(refused)} back {rel(back)}; failed loads (start, end) "
        f"{[(rel(a), rel(b), p, st) for a, b, p, st in pages.spans if st != 200]}"
    )
    assert cut_only == [], f"{timeline}\n{log[-6000:]}"
    assert any(started >= back + 1 for started, _ in pages.results), "no page was loaded after the outage"
    # A page load answered again on a new connection is one WARNING line, not an ERROR with a
    # traceback: the ERRORs are the loads that really failed (the three dead seconds).
    log = stack.daphne.log("daphne")[logged_before:]
    errors = log.count("ERROR django.request")
    served_errors = sum(1 for _, status in pages.results if status >= 500)
    assert errors <= served_errors, f"{errors} ERROR lines for {served_errors} failed loads:\n{log[-3000:]}"
    # The pool's reconnection warnings: at most one a second (its threads logged 3-10 a second).
    pool_lines = log.count("psycopg.pool")
    assert pool_lines <= back - outage + 3, f"{pool_lines} pool warnings in {back - outage:.1f} s"
    print(f"{log.count('answering again on a new connection')} loads answered again; {errors} ERROR lines")
    print(f"{pool_lines} pool warnings in {back - outage:.1f} s")
    print(timeline)
    print(
        f"caught up {took:.1f} s after the last cut; {len(pages.results)} page loads, "
        f"{len(pages.failures((outage, back + 1)))} failed while no connection was possible"
    )


# --- Redis ----------------------------------------------------------------------------------------


def group_size(redis: PrivateRedis, group: str) -> int:
    return int(redis.call("ZCARD", f"asgi:group:{group}"))


def in_session_groups(redis: PrivateRedis) -> int:
    """Sockets in all session groups: each socket joins its session's group itself."""
    return sum(int(redis.call("ZCARD", key)) for key in redis.call("KEYS", "asgi:group:session-*"))


async def open_sockets(base: str, headers: dict[str, str], page: str, count: int) -> list[ClientConnection]:
    async def one() -> ClientConnection:
        # A handshake Daphne drops on a saturated machine (its 5 s websocket connect timeout) is
        # tried again, as app.js reconnects: this drill is about leaving, not about arriving.
        for attempt in range(3):
            try:
                return await connect(websocket_url(base, page), additional_headers=headers, open_timeout=60)
            except (InvalidMessage, EOFError, ConnectionError):
                if attempt == 2:
                    raise
                await asyncio.sleep(1)
        raise AssertionError("unreachable")

    sockets: list[ClientConnection] = []
    for start in range(0, count, 100):  # as browsers arrive: in waves, not one burst of handshakes
        sockets += await asyncio.gather(*(one() for _ in range(min(100, count - start))))
    return sockets


def test_500_sockets_closing_at_once_all_leave_their_groups(stack: Stack, processes: Processes) -> None:
    headers = websocket_headers(stack.base, httpx.Client(cookies=stack.cookies))

    # The shared groups have one member per process (tasksapp/live/hub.py), held while the stack's
    # quiet socket stays open; each socket joins its session's group (and its user's) itself.
    alone = in_session_groups(stack.redis)

    async def drill() -> float:
        crowd = await open_sockets(stack.base, headers, "tasks", SOCKETS)
        try:
            # A handshake Daphne dropped and open_sockets tried again had joined its groups already:
            # that channel leaves once Daphne has told its consumer (CI11: 519 of 501 at first).
            joined = time.monotonic()
            while in_session_groups(stack.redis) != alone + SOCKETS:
                assert time.monotonic() - joined < 15, (
                    f"{in_session_groups(stack.redis)} channels in session groups, not {alone + SOCKETS}"
                )
                await asyncio.sleep(0.1)
            assert group_size(stack.redis, "tasks") == 1  # one Daphne: one member, not one a socket
        finally:  # never left open for the drills after this one
            await asyncio.gather(*(socket.close() for socket in crowd))  # all at once
        closed = time.monotonic()
        while in_session_groups(stack.redis) > alone:  # Bound: every channel leaves within 15 s
            assert time.monotonic() - closed < 15, (
                f"{in_session_groups(stack.redis) - alone} dead channels left"
            )
            await asyncio.sleep(0.1)
        return time.monotonic() - closed

    left = asyncio.run(drill())
    log = stack.daphne.log("daphne")
    assert "Too many connections" not in log, log[-3000:]
    print(f"{SOCKETS} sockets left their groups {left:.1f} s after closing at once")


def test_a_quiet_socket_lived_through_a_minute_of_silence(stack: Stack, processes: Processes) -> None:
    """The socket opened with the stack, on the servers page, which hears a change now and then;
    redis-py 8's 5 s socket timeout used to close every socket of a Daphne process (1011) after
    6-10 s without a message, and the drills before left many such silences."""
    remaining = stack.quiet_since + QUIET_SECONDS - time.monotonic()
    if remaining > 0:  # the drills before took less than a minute (an idle machine)
        time.sleep(remaining)
    assert stack.quiet.closed is None, f"the quiet socket was closed: {stack.quiet.closed}"
    [(server,)] = sql(stack.database, "SELECT id FROM tasksapp_mcpserver")
    heard = len(stack.quiet.times)
    asyncio.run(publish(stack.redis, "servers", {"type": "server.changed", "id": server}))
    wait_until(lambda: len(stack.quiet.times) > heard, 10, lambda: "the quiet socket heard nothing")
    log = stack.daphne.log("daphne")
    assert "Timeout reading" not in log, log[-3000:]
    print(f"the quiet socket lived {time.monotonic() - stack.quiet_since:.0f} s and still hears changes")


async def publish(redis: PrivateRedis, group: str, message: dict[str, object]) -> None:
    """What the services publish, sent from this process through the layer."""
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[redis.url])
    try:
        await layer.group_send(group, {**message, "group": group})  # named, as tasksapp/events.py does
    finally:
        await layer.close_pools()


def test_redis_dropped_and_back_pages_reconnect_and_nudges_resume(stack: Stack, processes: Processes) -> None:
    """Last: it kills this module's Redis (the quiet socket's check is done by now). Redis stays
    away OUTAGE_SECONDS while pages keep reconnecting, as their script does, and the worker keeps
    publishing a counting task's changes: each process says so in a few lines, not a traceback a
    socket or a message."""
    listening = group_size(stack.redis, "workers")  # a killed worker of an earlier drill may linger
    processes.worker("W", stack.env, "--no-listen")
    # Polled once a minute: only a nudge through Redis makes the worker see a cancel at once.
    [task] = start_tasks(stack.env, ("run_forever", 1, {"delay": 30, "poll_interval_ms": 60000}))
    wait_until(lambda: holders(stack.database) == {"W": 1}, 20, processes.output)
    wait_until(lambda: group_size(stack.redis, "workers") > listening, 20, processes.output)
    start_tasks(stack.env, ("slow_count", 1, {"n": 200, "delay": 0.2}))  # changes all through the outage
    wait_until(lambda: holders(stack.database) == {"W": 2}, 20, processes.output)
    headers = websocket_headers(stack.base, httpx.Client(cookies=stack.cookies))
    pages = Reconnecting(stack.base, headers)
    logged = {name: len(log) for name, log in drill_logs(stack, processes).items()}

    async def drill() -> tuple[str, float]:
        crowd = [asyncio.create_task(pages.follow(page)) for page in CROWD]
        while pages.opened < len(crowd):
            await asyncio.sleep(0.1)
        before = await connect(websocket_url(stack.base, "tasks"), additional_headers=headers)
        stack.redis.kill()
        killed = time.monotonic()
        # The server closes it (its channel layer is gone), after the frames it had built already:
        # the counting task changes every 0.2 s, so one may be on its way as Redis goes (CI, once).
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(20):
                while True:
                    await before.recv()
        await asyncio.sleep(killed + OUTAGE_SECONDS - time.monotonic())
        opened_during = pages.opened
        stack.redis.start()  # a restarted Redis: empty, on the same address
        restarted = time.monotonic()
        page = httpx.get(f"{stack.base}/tasks/", cookies=stack.cookies, timeout=30)
        assert page.status_code == 200
        after = await reconnect(stack.base, headers)  # what the page's script does after a close
        while not group_size(stack.redis, "workers"):  # the worker's nudge listener joins again
            assert time.monotonic() - restarted < 30, "the worker never listened for nudges again"
            await asyncio.sleep(0.1)
        while pages.opened < opened_during + len(crowd):  # every page of the crowd is back too
            assert time.monotonic() - restarted < 30, f"{pages.opened - opened_during} pages reconnected"
            await asyncio.sleep(0.1)
        for follower in crowd:
            follower.cancel()
        cancelled = time.monotonic()
        await asyncio.to_thread(manage, stack.env, "tasks", "cancel", str(task))
        frame = ""
        async with asyncio.timeout(20):  # the counting task's changes come too
            while f"task-row-{task}" not in frame:
                frame = str(await after.recv())
        await after.close()
        return frame, cancelled

    frame, cancelled = asyncio.run(drill())
    assert f"task-row-{task}" in frame, frame[:300]
    # Bound: the worker polls the cancelled task within 10 s of the cancel (not after its minute),
    # because the nudge reached it through the restarted Redis.
    wait_until(lambda: statuses(stack.database)["cancelled"] == 1, 10, processes.output)
    assert processes.running["worker-W"].poll() is None
    print(f"cancel mirrored {time.monotonic() - cancelled:.1f} s after it was sent")
    # The outage in each process's log: a few lines (lost, still lost every 30 s, back), no
    # traceback (before: one per socket refused or closed in Daphne, 50-63 in 15 s of the drill).
    counts: dict[str, tuple[int, int, bool, str]] = {}
    for name, log in drill_logs(stack, processes).items():
        during = log[logged[name] :]
        on_redis = [line for line in during.splitlines() if REDIS_LINE.search(line)]
        first = during.find("Traceback")  # the first traceback itself, where there is one
        shown = "\n".join(on_redis[:20]) + f"\n...\n{during[max(first, 0) - 300 :][:3000]}"
        counts[name] = (len(on_redis), during.count("Traceback"), "Redis answers again" in during, shown)
        print(f"{name}: {len(on_redis)} lines on Redis, {during.count('Traceback')} tracebacks")
    for name, (lines, tracebacks, back, shown) in counts.items():
        assert tracebacks == 0, f"{name}: {tracebacks} tracebacks during the outage:\n{shown}"
        assert lines <= 5, f"{name}: {lines} lines on Redis in a {OUTAGE_SECONDS} s outage:\n{shown}"
        assert back, f"{name} never said Redis was back:\n{shown}"
    print(f"{pages.refused} socket handshakes refused during the outage, {pages.opened} opened")


OUTAGE_SECONDS = 12
CROWD = ("tasks", "overview", "inbox", "servers") * 2
# A log line about Redis: ours (tasksapp.redislayer), the worker's nudges and what the old code
# logged (the publisher's, the hub's, Daphne's "Exception inside application: Error 111 ...").
REDIS_LINE = re.compile(r"^\d{4}-.*(Redis|redis|channel layer|nudges|publish|Error 111)")


def drill_logs(stack: Stack, processes: Processes) -> dict[str, str]:
    return {"daphne": stack.daphne.log("daphne"), "worker": processes.log("worker-W")}


class Reconnecting:
    """Pages whose sockets are closed or refused and connect again a second later, as app.js
    does with htmx's back-off (here without the back-off: the most reconnects an outage sees)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        self.base, self.headers = base, headers
        self.opened = 0
        self.refused = 0

    async def follow(self, page: str) -> None:
        while True:
            try:
                async with connect(
                    websocket_url(self.base, page), additional_headers=self.headers, open_timeout=10
                ) as socket:
                    self.opened += 1
                    await socket.wait_closed()
            except (InvalidHandshake, OSError, TimeoutError):
                self.refused += 1
            await asyncio.sleep(1)


async def reconnect(base: str, headers: dict[str, str]) -> ClientConnection:
    deadline = time.monotonic() + 20
    while True:
        try:
            return await connect(websocket_url(base, "tasks"), additional_headers=headers, open_timeout=5)
        except Exception:
            assert time.monotonic() < deadline, "the page could not reconnect after Redis came back"
            await asyncio.sleep(0.5)
