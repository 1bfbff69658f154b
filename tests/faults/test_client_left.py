"""Browsers that leave while the database is slow must not use up Daphne's connection pool.

The production layout (tests/support/stack.py): a database of this test's own, one Daphne with a pool of
three connections. The database is made slow where it is in production, in the database: a
transaction of the test's holds a lock on the session table, so every page load waits in its
first query (or, past the first three, for a pooled connection). The browsers give up meanwhile,
and Daphne cancels each request once it has outlived its client by --application-close-timeout
(10 s by default; 2 s here, the same mechanism). Then the lock goes and a normal page load must be
answered at once: the abandoned requests' threads handed their connections back
(tasksapp/lib/connections.py HandBackConnections). Before, each thread ended holding its pooled
connection, the pool counted them as lent forever, and every page waited DATABASE_POOL_TIMEOUT
(30 s) and failed.
"""

import socket
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.peers.launch import free_port
from tests.support.stack import (
    Processes,
    connections_to,
    create_operator,
    env_for,
    login,
    postgres_database,
    process_group,
    sql,
    wait_until,
)

pytestmark = pytest.mark.postgres
POOL_SIZE = 3
ABANDONED = POOL_SIZE * 3 + 1
CLOSE_TIMEOUT_SECONDS = 2
KILLED = "took too long to shut down and was killed"


@dataclass
class Dashboard:
    database: str
    base: str
    client: httpx.Client
    daphne: Processes


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    with postgres_database("clientleft") as database, process_group(tmp_path) as daphne:
        env = env_for(database, DATABASE_POOL_SIZE=str(POOL_SIZE))
        create_operator(env)
        port = free_port()
        argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        argv += ["--application-close-timeout", str(CLOSE_TIMEOUT_SECONDS), "dashboard.asgi:application"]
        daphne.start("daphne", argv, env)
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(base), 30, daphne.output)
        with httpx.Client(base_url=base, timeout=5) as client:
            yield Dashboard(database, base, login(base, client), daphne)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _waiting_on_locks(database: str) -> int:
    name = database.rsplit("/", 1)[1]
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
    [(count,)] = sql(database, query, name)
    return int(count)


def test_requests_whose_clients_left_hand_their_pooled_connections_back(dashboard: Dashboard) -> None:
    port = int(dashboard.base.rsplit(":", 1)[1])
    cookie = "; ".join(f"{name}={value}" for name, value in dashboard.client.cookies.items())
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n".encode()
    with closing(psycopg.connect(dashboard.database)) as slow:
        slow.execute("LOCK TABLE tasksapp_session IN ACCESS EXCLUSIVE MODE")
        browsers = [socket.create_connection(("127.0.0.1", port)) for _ in range(ABANDONED)]
        for browser in browsers:
            browser.sendall(request)
        # Every pooled connection is lent to a page load stuck on the lock; the others wait for one.
        wait_until(lambda: _waiting_on_locks(dashboard.database) == POOL_SIZE, 15, dashboard.daphne.output)
        for browser in browsers:
            browser.close()
        wait_until(
            lambda: dashboard.daphne.log("daphne").count(KILLED) >= ABANDONED, 15, dashboard.daphne.output
        )
        slow.rollback()
    started = time.monotonic()
    try:
        answer = dashboard.client.get("/")
    except httpx.TimeoutException:
        pytest.fail(
            f"no page within 5 s after {ABANDONED} requests whose clients left: the pool's "
            f"{POOL_SIZE} connections were never handed back",
            pytrace=False,
        )
    took = time.monotonic() - started
    assert answer.status_code == 200
    assert connections_to(dashboard.database) <= POOL_SIZE
    print(f"{ABANDONED} abandoned requests, pool of {POOL_SIZE}: the next page answered in {took:.2f} s")
