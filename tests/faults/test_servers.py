"""MCP servers that come and go or misbehave, against the worker and the services in this process.

The reference server is restarted for real; misbehaviour no real server produces on demand (a
listen that drips keep-alives and never acknowledges, a reused task id, a tool call that stays
silent until it answers) comes from a scripted server at the network edge (tests/support/faults.py).
"""

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from tasksapp import services
from tasksapp.engine.worker import Worker
from tasksapp.models import McpServer, OperatorAction, RemoteTask, WorkerHeartbeat
from tests.mcpclient.hostile_server import json_reply, ping_forever, raw_reply, response, task
from tests.peers.launch import ROOT, RunningPeer, demoserver_argv, free_port, start_peer
from tests.support.faults import ScriptedServer, scripted_server

pytestmark = pytest.mark.django_db(transaction=True)
DEMO_READY = "demoserver listening on"
TOOL = {"name": "slow", "inputSchema": {"type": "object", "properties": {}}}


async def wait_for(condition: Callable[[], bool], timeout: float, what: str = "") -> float:
    """Wait until `condition()` (run against the database) holds; returns the seconds it took."""
    started = time.monotonic()
    while not await sync_to_async(condition)():
        assert time.monotonic() - started < timeout, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def row(pk: int) -> RemoteTask:
    return RemoteTask.objects.get(pk=pk)


def server_row(pk: int) -> McpServer:
    return McpServer.objects.get(pk=pk)


# --- an MCP server restart ------------------------------------------------------------------------


@pytest.fixture
def restartable() -> Iterator[list[RunningPeer]]:
    """A reference server of this test's own on a fixed port, so it can come back where it was."""
    port = free_port()
    peers = [start_peer("restart-demo", demoserver_argv("--poll-interval-ms", "200"), DEMO_READY, port)]
    try:
        yield peers
    finally:
        for peer in peers:
            peer.stop()


def test_an_mcp_server_restart_keeps_push_and_health(restartable: list[RunningPeer]) -> None:
    first = restartable[0]
    port = int(first.url.rsplit(":", 1)[1].split("/")[0])
    server = services.server_create(name="restarting", url=first.url, headers={}, user=None)
    old = services.call_start(server=server, tool="run_forever", arguments={"delay": 30}, user=None).task
    assert old is not None

    async def scenario() -> tuple[float, float, Worker]:
        worker = Worker(refresh_seconds=0.2)
        runner = asyncio.create_task(worker.run())
        try:
            await wait_for(lambda: server_row(server.pk).listen_supported is True, 15, "push to start")
            first.stop()
            await wait_for(lambda: server_row(server.pk).consecutive_failures > 0, 20, "the outage")
            argv = demoserver_argv("--poll-interval-ms", "200")
            restartable.append(await asyncio.to_thread(start_peer, "restart-demo", argv, DEMO_READY, port))
            back = time.monotonic()
            # Bound: the server the restart forgot the task: expired, and healthy again, within 15 s.
            await wait_for(lambda: row(old.pk).expired, 15, "the forgotten task to expire")
            await wait_for(lambda: server_row(server.pk).health == "healthy", 15, "health")
            new = await asyncio.to_thread(
                lambda: (
                    services.call_start(
                        server=server, tool="slow_count", arguments={"n": 8, "delay": 0.25}, user=None
                    ).task
                )
            )
            assert new is not None
            done = await wait_for(lambda: row(new.pk).status == "completed", 20, "the new task")
            sources = await sync_to_async(lambda: set(row(new.pk).events.values_list("source", flat=True)))()
            assert "push" in sources, sources  # push works again after the restart
            return time.monotonic() - back, done, worker
        finally:
            worker.stop()
            await runner

    took, done, _ = asyncio.run(scenario())
    expired = row(old.pk)
    assert "no longer knows this task" in expired.last_error
    assert expired.events.filter(note__startswith="expired").count() == 1
    assert server_row(server.pk).listen_supported is True  # an empty ack is not "no listen"
    assert server_row(server.pk).health == "healthy"
    print(f"recovered {took:.1f} s after the server came back; the new task completed in {done:.1f} s")


# --- listen on a server that drips keep-alives and never acknowledges -----------------------------


class DrippingServer:
    """Answers tasks/get; its listen drips keep-alives forever and never acknowledges."""

    def __init__(self) -> None:
        self.open_streams = 0
        self.most_open = 0
        self.listens: list[float] = []
        self.scripted = ScriptedServer(self.script)

    async def script(self, request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        method = message.get("method")
        if method == "tools/list":
            return json_reply(response(message, {"tools": [TOOL]}))
        if method == "tools/call":
            return json_reply(response(message, {"resultType": "task", **task(pollIntervalMs=1000)}))
        if method == "subscriptions/listen":
            self.listens.append(time.monotonic())
            self.open_streams += 1
            self.most_open = max(self.most_open, self.open_streams)
            try:
                return await ping_forever(request, every=0.2)
            finally:
                self.open_streams -= 1
        return json_reply(response(message, {"resultType": "complete", **task(pollIntervalMs=1000)}))


def test_listen_without_an_ack_is_closed_and_retried_with_back_off(settings: Any) -> None:
    settings.MCP_LISTEN_ACK_TIMEOUT_MS = 500
    dripping = DrippingServer()
    try:
        server = services.server_create(name="dripping", url=dripping.scripted.url, headers={}, user=None)
        services.call_start(server=server, tool="anything", arguments={}, user=None)

        async def run() -> None:
            worker = Worker(refresh_seconds=0.2)
            runner = asyncio.create_task(worker.run())
            await asyncio.sleep(6)  # the drill's length: this test counts what happens in it
            worker.stop()
            await runner

        asyncio.run(run())
        gaps = [round(b - a, 1) for a, b in itertools.pairwise(dripping.listens)]
        # One attempt at a time, each closed after the 0.5 s ack bound, then 1, 2, 4 s of back-off:
        # 3 attempts in 6 s (before: a new stream every second, none of them ever closed).
        assert 2 <= len(dripping.listens) <= 3, gaps
        assert dripping.most_open == 1, dripping.most_open
        assert all(later >= earlier for earlier, later in itertools.pairwise(gaps)), gaps
        assert dripping.open_streams == 0  # nothing left open once the worker stopped
        assert server_row(server.pk).listen_supported is not False  # no ack is not a refusal
    finally:
        dripping.scripted.close()


# --- health and wording ---------------------------------------------------------------------------


def test_an_idle_server_recorded_as_failing_is_probed_back_to_healthy(demo_server: RunningPeer) -> None:
    server = services.server_create(name="idle", url=demo_server.url, headers={}, user=None)
    services.server_record_failure(  # by a worker that is then restarted under the same name
        server_id=server.pk, worker="w1", error="cannot reach it", failures=3, backoff_until=server.created_at
    )
    assert server_row(server.pk).health == "failing"

    async def run() -> float:
        worker = Worker(name="w1", refresh_seconds=0.2)
        runner = asyncio.create_task(worker.run())
        try:  # Bound: healthy within 5 s, with no task to poll on it
            return await wait_for(lambda: server_row(server.pk).health == "healthy", 5, "the probe")
        finally:
            worker.stop()
            await runner

    asyncio.run(run())
    assert server_row(server.pk).consecutive_failures == 0


def scripted_task_server(tasks_get: Callable[[dict[str, Any]], web.StreamResponse]) -> ScriptedServer:
    """Creates a task whose TTL passed long ago; tasks/get answers as `tasks_get` says."""
    old = task(createdAt="2020-01-01T00:00:00Z", ttlMs=1000)

    async def script(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if message.get("method") == "tools/list":
            return json_reply(response(message, {"tools": [TOOL]}))
        if message.get("method") == "tools/call":
            return json_reply(response(message, {"resultType": "task", **old}))
        return tasks_get(message)

    return ScriptedServer(script)


@pytest.mark.parametrize(
    ("tasks_get", "said"),
    [
        (lambda m: raw_reply(b"<html>oops</html>", content_type="application/json"), "answered wrongly"),
        (lambda m: raw_reply(b"busy", status=503, content_type="text/plain"), "answered HTTP 503"),
    ],
    ids=["malformed", "http-503"],
)
def test_a_task_expired_while_its_server_misbehaved_says_what_happened(
    settings: Any, tasks_get: Callable[[dict[str, Any]], web.StreamResponse], said: str
) -> None:
    settings.MCP_TTL_GRACE_MS = 0
    scripted = scripted_task_server(tasks_get)
    try:
        server = services.server_create(name="wrong", url=scripted.url, headers={}, user=None)
        started = services.call_start(server=server, tool="anything", arguments={}, user=None).task
        assert started is not None

        async def run() -> None:
            worker = Worker(refresh_seconds=0.2, listen=False)
            runner = asyncio.create_task(worker.run())
            try:
                await wait_for(lambda: row(started.pk).expired, 10, "the expiry")
            finally:
                worker.stop()
                await runner

        asyncio.run(run())
    finally:
        scripted.close()
    reason = row(started.pk).last_error
    assert said in reason and "unreachable" not in reason, reason


def test_new_tasks_are_polled_at_once_whatever_their_interval(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    async def run() -> list[float]:
        worker = Worker(refresh_seconds=0.2, listen=False)
        runner = asyncio.create_task(worker.run())
        try:
            await wait_for(WorkerHeartbeat.objects.exists, 10, "the worker to start")
            waits = []
            for _ in range(5):
                begun = time.monotonic()
                created = await asyncio.to_thread(
                    lambda: (
                        services.call_start(
                            server=demo_registered,
                            tool="run_forever",
                            arguments={"delay": 30, "poll_interval_ms": 120_000},
                            user=None,
                        ).task
                    )
                )
                assert created is not None
                remote = created.remote_id

                def polled(remote: str = remote) -> bool:
                    return remote in demo_server_pollers(demo_server)

                # Polled within 30 s: at once (a claim cycle and a poll), not after its 2-minute interval.
                await wait_for(polled, 30, "the first poll")
                waits.append(time.monotonic() - begun)
            return waits
        finally:
            worker.stop()
            await runner

    waits = asyncio.run(run())
    print(f"first polls {[round(wait, 2) for wait in waits]} s after the call")


def test_a_frozen_worker_does_not_hold_back_tasks_nobody_polls(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    started = [
        services.call_start(server=demo_registered, tool="run_forever", arguments={"delay": 30}, user=None)
        for _ in range(8)
    ]
    tasks = [s.task for s in started if s.task is not None]
    assert len(tasks) == 8
    # A worker that froze 20 s ago (within its 30 s lease, so it still looks alive) holding two.
    now = timezone.now()
    WorkerHeartbeat.objects.create(
        worker="frozen", hostname="elsewhere", pid=1, started_at=now, last_beat_at=now - timedelta(seconds=20)
    )
    RemoteTask.objects.filter(pk__in=[t.pk for t in tasks[:2]]).update(
        leased_by="frozen", lease_until=now + timedelta(seconds=30)
    )
    free = {t.remote_id for t in tasks[2:]}
    demo_server.clear()

    async def run() -> float:
        worker = Worker(refresh_seconds=0.2, listen=False)
        runner = asyncio.create_task(worker.run())
        try:  # Bound: the six free tasks polled within 3 s, not when the frozen worker's beat lapses
            return await wait_for(lambda: free <= set(demo_server_pollers(demo_server)), 3, "all six")
        finally:
            worker.stop()
            await runner

    asyncio.run(run())
    assert RemoteTask.objects.filter(leased_by="frozen").count() == 2  # its leases are still its own


def demo_server_pollers(peer: RunningPeer) -> dict[str, Any]:
    import httpx

    return dict(httpx.get(f"{peer.base}/_debug/pollers", timeout=5).json())


def test_get_with_options_ended_by_hand_and_tasks_show_in_text(demo_registered: McpServer) -> None:
    started = services.call_start(server=demo_registered, tool="ask_form", arguments={"delay": 0}, user=None)
    assert started.task is not None
    remote, pk = started.task.remote_id, started.task.pk
    done = subprocess.run(
        [sys.executable, "-m", "tasksapp.mcpclient", demo_registered.url, "get", "--", remote],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 3), done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["taskId"] == remote

    from io import StringIO

    from tests.support.engine_helpers import run_worker_until

    run_worker_until(lambda: row(pk).status == "input_required", listen=False)
    out = StringIO()
    call_command("tasks", "show", str(pk), stdout=out)
    text = out.getvalue()
    assert "open input requests: 1" in text and "elicitation/create" in text, text
    assert "history:" in text and "create" in text and "input_required" in text, text


# --- tool calls: timeouts and reused task ids -----------------------------------------------------


def silent_server(seconds: float, answer: dict[str, Any]) -> Any:
    """Says nothing at all (no headers) for `seconds`, then answers tools/call."""

    async def script(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if message.get("method") == "tools/list":
            return json_reply(response(message, {"tools": [TOOL]}))
        await asyncio.sleep(seconds)
        return json_reply(response(message, answer))

    return scripted_server(script)


RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "done at last"}], "isError": False}


def test_the_client_waits_for_a_silent_tool_call_as_long_as_the_call_timeout() -> None:
    from tasksapp.mcpclient import McpClient, Timeouts, ToolResult

    async def call(url: str) -> object:
        async with McpClient(url, timeouts=Timeouts(read=1, call=9), era="modern") as client:
            return await client.call_tool("slow", {})

    with silent_server(2.5, RESULT) as silent:
        outcome = asyncio.run(call(silent.url))  # silent for 2.5 s: longer than the read timeout
    assert isinstance(outcome, ToolResult) and outcome.raw["content"][0]["text"] == "done at last"


def test_a_tool_call_may_stay_silent_longer_than_the_read_timeout() -> None:
    with silent_server(2.5, RESULT) as silent:
        server = services.server_create(
            name="silent", url=silent.url, headers={}, user=None, timeouts=(1, 10)
        )
        started = services.call_start(server=server, tool="slow", arguments={}, user=None)
    assert started.outcome == "result" and started.result is not None
    assert started.result["content"][0]["text"] == "done at last"


def test_a_tool_call_past_the_call_timeout_says_so() -> None:
    with silent_server(4, RESULT) as silent:
        server = services.server_create(name="silent", url=silent.url, headers={}, user=None, timeouts=(1, 2))
        with pytest.raises(services.RemoteFailed, match="did not answer within its call timeout of 2 s"):
            services.call_start(server=server, tool="slow", arguments={}, user=None)
    assert OperatorAction.objects.get(action="start").ok is False


@pytest.fixture
def operator_client() -> Client:
    user = User.objects.create_user("otto", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


def test_the_run_page_says_what_it_waits_for_and_works_without_javascript(operator_client: Client) -> None:
    with silent_server(1.5, RESULT) as silent:
        server = services.server_create(name="silent", url=silent.url, headers={}, user=None, timeouts=(1, 9))
        url = f"/servers/{server.pk}/tools/slow/run/"
        page = operator_client.get(url).content.decode()
        assert "Run waits for silent to answer, for up to 9 s" in page
        assert 'data-call-timeout="9"' in page  # the script counts the seconds against it
        answered = operator_client.post(url, {})  # a plain form POST, as without JavaScript
    assert answered.status_code == 200 and "done at last" in answered.content.decode()


def reusing_server() -> ScriptedServer:
    async def script(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if message.get("method") == "tools/list":
            return json_reply(response(message, {"tools": [TOOL]}))
        return json_reply(response(message, {"resultType": "task", **task(taskId="same-every-time")}))

    return ScriptedServer(script)


def test_a_server_that_reuses_a_task_id_gets_a_failed_call_not_a_500(operator_client: Client) -> None:
    reusing = reusing_server()
    try:
        server = services.server_create(name="reusing", url=reusing.url, headers={}, user=None)
        first = services.call_start(server=server, tool="slow", arguments={}, user=None).task
        assert first is not None
        with pytest.raises(services.CallFailed, match=f"already given to task #{first.pk}"):
            services.call_start(server=server, tool="slow", arguments={}, user=None)
        page = operator_client.post(f"/servers/{server.pk}/tools/slow/run/", {})
    finally:
        reusing.close()
    assert page.status_code == 200
    assert "reusing task ids" in page.content.decode()
    assert RemoteTask.objects.count() == 1 and RemoteTask.objects.get().pk == first.pk
    audit = list(OperatorAction.objects.filter(action="start").order_by("id").values_list("ok", "detail"))
    assert [ok for ok, _ in audit] == [True, False, False]
    assert "already given to task" in audit[1][1]["error"]
