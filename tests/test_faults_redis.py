"""Fault drills on Redis (the channel layer between Daphne and the workers), each against a private
redis-server of its own, so the shared one is never touched.

- A quiet websocket stays open for 60 s (redis-py 8 defaults its socket timeout to 5 s, the length
  of channels_redis's blocking read: every quiet socket used to die with 1011 after 6-10 s), while
  500 sockets close at once and all leave their groups.
- Redis is killed and started again: pages reconnect, and the worker's nudges come back.
"""

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.peers.launch import RunningPeer
from tests.stack import (
    PrivateRedis,
    Processes,
    create_operator,
    env_for,
    login,
    manage,
    postgres_database,
    private_redis,
    process_group,
    sql,
    wait_until,
    websocket_headers,
    websocket_url,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
QUIET_SECONDS = 60
SOCKETS = 500


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    with process_group(tmp_path) as group:
        yield group


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    with private_redis(tmp_path) as server:
        yield server


@pytest.fixture
def database() -> Iterator[str]:
    with postgres_database("faults_redis") as url:
        yield url


def group_size(redis: PrivateRedis, group: str) -> int:
    return int(redis.call("ZCARD", f"asgi:group:{group}"))


async def open_sockets(base: str, headers: dict[str, str], page: str, count: int) -> list[ClientConnection]:
    async def one() -> ClientConnection:
        return await connect(websocket_url(base, page), additional_headers=headers, open_timeout=60)

    sockets: list[ClientConnection] = []
    for start in range(0, count, 100):  # as browsers arrive: in waves, not one burst of 500 handshakes
        sockets += await asyncio.gather(*(one() for _ in range(min(100, count - start))))
    return sockets


def test_a_quiet_socket_stays_open_while_500_others_close_at_once(
    database: str, redis: PrivateRedis, processes: Processes, demo_server: RunningPeer
) -> None:
    env = env_for(database, REDIS_URL=redis.url)
    manage(env, "servers", "add", "demo", demo_server.url)
    create_operator(env)
    base = processes.daphne("daphne", env)
    headers = websocket_headers(base, login(base))
    [(server_pk,)] = sql(database, "SELECT id FROM tasksapp_mcpserver")

    async def drill() -> tuple[str, float, float]:
        quiet = await connect(websocket_url(base, "servers"), additional_headers=headers)
        opened = time.monotonic()
        crowd = await open_sockets(base, headers, "tasks", SOCKETS)
        assert group_size(redis, "tasks") == SOCKETS
        await asyncio.gather(*(socket.close() for socket in crowd))  # all at once
        closed = time.monotonic()
        while group_size(redis, "tasks"):  # Bound: every channel leaves its group within 15 s
            assert time.monotonic() - closed < 15, f"{group_size(redis, 'tasks')} dead channels left"
            await asyncio.sleep(0.1)
        left = time.monotonic() - closed
        await asyncio.sleep(max(0.0, opened + QUIET_SECONDS - time.monotonic()))
        # After a minute of silence the socket is open and still subscribed: a change reaches it.
        await publish_server_changed(redis, server_pk)
        frame = await asyncio.wait_for(quiet.recv(), 10)
        quiet_for = time.monotonic() - opened
        await quiet.close()
        return str(frame), left, quiet_for

    frame, left, quiet_for = asyncio.run(drill())
    assert f'id="server-row-{server_pk}"' in frame or "demo" in frame, frame[:300]
    log = processes.log("daphne")
    assert "Too many connections" not in log and "Timeout reading" not in log, log[-3000:]
    print(f"{SOCKETS} sockets left their groups {left:.1f} s after closing; quiet socket: {quiet_for:.0f} s")


async def publish_server_changed(redis: PrivateRedis, server_pk: int) -> None:
    """What services.server_record_success publishes, sent from this process through the layer."""
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[redis.url])
    try:
        await layer.group_send("servers", {"type": "server.changed", "id": server_pk})
    finally:
        await layer.close_pools()


def test_redis_dropped_and_back_pages_reconnect_and_nudges_resume(
    database: str, redis: PrivateRedis, processes: Processes, demo_server: RunningPeer
) -> None:
    env = env_for(database, REDIS_URL=redis.url)
    manage(env, "servers", "add", "demo", demo_server.url)
    create_operator(env)
    base = processes.daphne("daphne", env)
    client = login(base)
    headers = websocket_headers(base, client)
    processes.worker("W", env, "--no-listen")
    # Polled once a minute: only a nudge through Redis makes the worker see a cancel at once.
    arguments = '{"delay": 30, "poll_interval_ms": 60000}'
    called = manage(env, "call", "demo", "run_forever", arguments, "--json")
    task = json.loads(called)["task"]["id"]
    wait_until(lambda: holder(database, task) == "W", 20, processes.output)

    async def drill() -> tuple[str, float]:
        before = await connect(websocket_url(base, "tasks"), additional_headers=headers)
        redis.kill()
        with pytest.raises(Exception):  # noqa: B017 - the server closes it: its channel layer is gone
            await asyncio.wait_for(before.recv(), 20)
        redis.start()  # a restarted Redis: empty, on the same address
        restarted = time.monotonic()
        page = httpx.get(f"{base}/tasks/", cookies=client.cookies, timeout=30)
        assert page.status_code == 200
        after = await reconnect(base, headers)  # what the page's script does after a close
        while not group_size(redis, "workers"):  # the worker's nudge listener joins again
            assert time.monotonic() - restarted < 30, "the worker never listened for nudges again"
            await asyncio.sleep(0.1)
        cancelled = time.monotonic()
        await asyncio.to_thread(manage, env, "tasks", "cancel", str(task))
        frame = await asyncio.wait_for(after.recv(), 20)
        await after.close()
        return str(frame), cancelled

    frame, cancelled = asyncio.run(drill())
    assert f"task-row-{task}" in frame, frame[:300]
    # Bound: the worker polls the cancelled task within 10 s of the cancel (not after its minute),
    # because the nudge reached it through the restarted Redis.
    took = wait_until(lambda: status(database, task) == "cancelled", 10, processes.output)
    assert processes.running["worker-W"].poll() is None
    print(f"cancel mirrored {time.monotonic() - cancelled:.1f} s after it was sent ({took:.1f} s wait)")


async def reconnect(base: str, headers: dict[str, str]) -> ClientConnection:
    deadline = time.monotonic() + 20
    while True:
        try:
            return await connect(websocket_url(base, "tasks"), additional_headers=headers, open_timeout=5)
        except Exception:
            assert time.monotonic() < deadline, "the page could not reconnect after Redis came back"
            await asyncio.sleep(0.5)


def holder(database: str, pk: int) -> str:
    return str(sql(database, "SELECT leased_by FROM tasksapp_remotetask WHERE id = %s", pk)[0][0])


def status(database: str, pk: int) -> str:
    return str(sql(database, "SELECT status FROM tasksapp_remotetask WHERE id = %s", pk)[0][0])
