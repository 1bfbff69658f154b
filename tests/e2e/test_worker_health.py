"""Health per (worker, server), in a real browser, on the production layout: PostgreSQL, Redis, one
Daphne, two worker processes, and the reference server behind a fault proxy at the network edge
that can take it down for everyone or cut one worker off (tests/support/faults.py).

Worker B backs off for a minute after a failure (MCP_BACKOFF_BASE_MS=60000: the 275 s back-off of
the drill that found this, made shorter), worker A for a second. Before health was per worker,
A's recovery rewrote the server's one row: the page said "healthy" while B waited out its
back-off, B's tasks were not polled for that minute, and their pages showed no stale mark.
"""

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import expect_live
from tests.peers.launch import demoserver_argv, running
from tests.support.drills import start_tasks
from tests.support.faults import PartitionProxy, partition_proxy
from tests.support.stack import (
    PASSWORD,
    Processes,
    create_operator,
    env_for,
    manage,
    postgres_database,
    private_redis,
    process_group,
    sql,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]
DEMO_READY = "demoserver listening on"
BOUND = 40.0  # seconds: well under B's own back-off (60 s, doubling), generous for a loaded machine
TASKS = 6


@dataclass
class Stack:
    database: str
    base: str
    proxy: PartitionProxy
    processes: Processes


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("health")
    with (
        postgres_database("health") as database,
        private_redis(logs) as redis,
        running("health-demo", demoserver_argv("--poll-interval-ms", "500"), DEMO_READY) as demo,
        partition_proxy(demo.url) as proxy,
        process_group(logs) as processes,
    ):
        env = env_for(database, REDIS_URL=redis.url, MCP_LEASE_SECONDS="30")
        manage(env, "servers", "add", "demo", proxy.url())  # the name tests/support/drills.py starts tasks on
        create_operator(env)
        base = processes.daphne("daphne", env)
        processes.worker("A", env)
        wait_until(lambda: beating(database) == {"A"}, 30, processes.output)
        processes.worker("B", {**env, "MCP_BACKOFF_BASE_MS": "60000", "MCP_BACKOFF_MAX_MS": "600000"})
        wait_until(lambda: beating(database) == {"A", "B"}, 30, processes.output)
        # Both alive before the tasks exist: each claims its fair share.
        start_tasks(env, ("run_forever", TASKS, {"delay": 2, "poll_interval_ms": 500}))
        wait_until(lambda: set(held(database)) == {"A", "B"}, 30, processes.output)
        yield Stack(database, base, proxy, processes)


def beating(database: str) -> set[str]:
    return {name for (name,) in sql(database, "SELECT worker FROM tasksapp_workerheartbeat")}


def held(database: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for pk, worker in sql(database, "SELECT id, leased_by FROM tasksapp_remotetask WHERE leased_by <> ''"):
        found.setdefault(worker, []).append(pk)
    return found


class Said:
    """What each worker logged since a moment: its failures and recoveries (the log says the same
    before and after health was per worker, so that this test can run against either)."""

    def __init__(self, processes: Processes) -> None:
        self.processes = processes
        self.start = {name: len(self._log(name)) for name in ("A", "B")}

    def _log(self, worker: str) -> str:
        return self.processes.log(f"worker-{worker}")

    def since(self, worker: str) -> str:
        return self._log(worker)[self.start[worker] :]

    def failed(self, *workers: str) -> bool:
        return all("server demo failing" in self.since(worker) for worker in workers)

    def recovered(self, worker: str) -> bool:
        return "server demo recovered" in self.since(worker)


def confirmed_after(database: str, pks: list[int], moment: float) -> bool:
    rows = sql(
        database,
        "SELECT count(*) FROM tasksapp_remotetask "
        "WHERE id = ANY(%s) AND last_confirmed_at > to_timestamp(%s)",
        pks,
        moment,
    )
    return int(rows[0][0]) == len(pks)


@pytest.fixture
def page(chromium: Browser, stack: Stack) -> Iterator[Page]:
    context = chromium.new_context(base_url=stack.base)
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).not_to_have_url(re.compile(r"/login/"))
    yield page
    context.close()


def test_one_workers_recovery_hides_neither_anothers_back_off_nor_its_stale_tasks(
    stack: Stack, page: Page
) -> None:
    database, proxy = stack.database, stack.proxy
    tasks = held(database)
    a_task, b_task = tasks["A"][0], tasks["B"][0]
    servers = page.context.new_page()
    servers.goto("/servers/")
    task_page = page.context.new_page()
    task_page.goto(f"/tasks/{b_task}/")
    page.goto("/tasks/")
    for live in (page, servers, task_page):
        expect_live(live)
    expect(page.locator(".stale-flag")).to_have_count(0)

    # The server goes away for everyone; then it is back for A but B is cut off from it.
    said = Said(stack.processes)
    proxy.down()
    wait_until(lambda: said.failed("A", "B"), BOUND, stack.processes.output)
    proxy.partition("B")
    proxy.up()
    wait_until(lambda: said.recovered("A"), BOUND, stack.processes.output)

    # None of A's tasks is marked once A's recovery reached the page (A reaches the server), and
    # every task B holds still is, live; the server says who is behind.
    for pk in tasks["A"]:
        expect(page.locator(f"#task-row-{pk} .stale-flag")).to_have_count(0, timeout=BOUND * 1000)
    for pk in tasks["B"]:
        expect(page.locator(f"#task-row-{pk} .stale-flag")).to_contain_text("stale since")
    health = servers.locator("#live-region tbody tr").first
    expect(health.locator(".badge").first).to_have_text(re.compile("backing off|failing"))
    expect(health.locator("[data-failing-workers]")).to_have_text("for worker B (1 of 2)")
    expect(task_page.locator("#stale-warning")).to_contain_text("for worker B, which holds this task")
    a_page = page.context.new_page()
    a_page.goto(f"/tasks/{a_task}/")
    expect(a_page.locator("#stale-warning")).to_have_count(0)
    stale_only = page.context.new_page()
    stale_only.goto("/tasks/?status=stale")
    expect(stale_only.locator("#task-rows tr[id^='task-row-']")).to_have_count(len(tasks["B"]))
    overview = page.context.new_page()
    overview.goto("/")
    expect(overview.locator('[data-tile="stale"] b')).to_have_text(str(len(tasks["B"])))

    # The partition heals: B's back-off (a minute, and growing) yields to A's fresh answers.
    healed = time.time()
    proxy.partition()
    wait_until(lambda: confirmed_after(database, tasks["B"], healed), BOUND, stack.processes.output)
    expect(page.locator(".stale-flag")).to_have_count(0, timeout=BOUND * 1000)
    expect(task_page.locator("#stale-warning")).to_have_count(0)
    expect(health.locator(".badge").first).to_have_text("healthy")
    expect(health.locator("[data-failing-workers]")).to_have_count(0)


def test_after_a_flap_the_second_workers_tasks_are_polled_again_at_once(stack: Stack, page: Page) -> None:
    """Down for everyone, then back: B polls again when A does, not a minute later."""
    database, proxy = stack.database, stack.proxy
    tasks = held(database)
    page.goto("/tasks/")
    expect_live(page)
    said = Said(stack.processes)
    proxy.down()
    wait_until(lambda: said.failed("A", "B"), BOUND, stack.processes.output)
    for pk in tasks["B"] + tasks["A"]:  # every task is stale while its worker cannot reach the server
        expect(page.locator(f"#task-row-{pk} .stale-flag")).to_contain_text("stale since")
    back = time.time()
    proxy.up()
    wait_until(lambda: confirmed_after(database, tasks["B"], back), BOUND, stack.processes.output)
    wait_until(lambda: said.recovered("A") and said.recovered("B"), BOUND, stack.processes.output)
    expect(page.locator(".stale-flag")).to_have_count(0, timeout=BOUND * 1000)
    assert "answered another worker" in said.since("B"), said.since("B")[-3000:]
