"""The worker against real servers: lifecycles, intervals, expiry, outages, push, crash recovery."""

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from aiohttp import web
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tasksapp import services
from tasksapp.engine.worker import Worker
from tasksapp.models import InputRequest, McpServer, OperatorAction, RemoteTask, WorkerHeartbeat
from tests.mcpclient import hostile_server as hostile
from tests.peers.launch import ROOT, RunningPeer
from tests.support.engine_helpers import run_worker, run_worker_until
from tests.support.faults import outage_proxy
from tests.support.scripted import QUESTION, scripted, started_on

pytestmark = pytest.mark.django_db(transaction=True)


def cli(*args: str) -> Any:
    from io import StringIO

    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def settled(task_id: int, *statuses: str) -> bool:
    task = RemoteTask.objects.get(pk=task_id)
    return task.status in statuses or task.expired


# The reference server, and fastmcp-tasks (a peer from .venv-peer, fetched by name: marked here).
REGISTERED = ["demo_registered", pytest.param("fastmcp_registered", marks=pytest.mark.fastmcp)]


@pytest.mark.parametrize("registered", REGISTERED)
def test_full_lifecycle_from_the_command_line(registered: str, request: pytest.FixtureRequest) -> None:
    server: McpServer = request.getfixturevalue(registered)
    tool = "ask_form" if server.name == "demo" else "ask_name"
    started = cli("call", server.name, tool, "{}")
    assert started["outcome"] == "task"
    task_id = started["task"]["id"]
    run_worker_until(lambda: RemoteTask.objects.get(pk=task_id).status == "input_required")
    shown = cli("tasks", "show", str(task_id))
    [(key, request_)] = shown["inputRequests"].items()
    assert request_["method"] == "elicitation/create"
    response = (
        {"action": "accept", "content": {"name": "Ada"}} if tool == "ask_name" else {"action": "decline"}
    )
    # call_command skips the command's run_from_argv, which puts the values after "--" for a
    # person at a shell: fastmcp's keys may start with '-' (a clean-clone run failed on one).
    call_command(
        "tasks", "answer", "--json", "--", str(task_id), key, json.dumps(response), stdout=StringIO()
    )
    run_worker_until(lambda: settled(task_id, "completed", "failed"))
    final = cli("tasks", "show", str(task_id))
    assert final["status"] == "completed" and final["inputRequests"] == {}
    first = final["events"][0]
    assert (first["source"], first["status"]) == ("create", "working"), final["events"]
    assert "input_required" in [e["status"] for e in final["events"]], final["events"]
    assert final["events"][-1]["status"] == "completed"
    assert {
        "id",
        "server",
        "tool",
        "startedBy",
        "agent",
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
        "mirroredAt",
        "ttlMs",
        "pollIntervalMs",
        "result",
        "error",
        "inputRequests",
        "cancelRequested",
        "expired",
        "lastChangedAt",
        "lastConfirmedAt",
        "staleSince",
        "events",
    } == set(final)
    assert final["staleSince"] is None and final["lastConfirmedAt"] >= final["lastChangedAt"]
    assert final["agent"] is None  # started from the command line, not by an agent
    listed = cli("tasks", "list", "--status", "completed", "--server", server.name)
    assert [row["id"] for row in listed] == [task_id]


@pytest.mark.parametrize("registered", REGISTERED)
def test_cancel_failed_and_tool_error_from_the_command_line(
    registered: str, request: pytest.FixtureRequest
) -> None:
    server: McpServer = request.getfixturevalue(registered)
    forever = cli("call", server.name, "run_forever", "{}")["task"]["id"]
    failing = cli("call", server.name, "fail_rpc", "{}")["task"]["id"]
    tool_error = cli("call", server.name, "fail_tool", "{}")["task"]["id"]
    assert cli("tasks", "cancel", str(forever))["cancelRequested"] is True
    run_worker_until(
        lambda: all(settled(t, "completed", "failed", "cancelled") for t in (forever, failing, tool_error))
    )
    assert cli("tasks", "show", str(forever))["status"] == "cancelled"
    failed = cli("tasks", "show", str(failing))
    assert failed["status"] == "failed" and failed["error"]["code"] == -32603
    errored = RemoteTask.objects.get(pk=tool_error)
    assert (errored.status, errored.is_tool_error) == ("completed", True)


def test_a_task_the_server_forgets_is_marked_expired_with_its_history_kept(
    demo_registered: McpServer,
) -> None:
    task = services.call_start(
        server=demo_registered, tool="short_ttl", arguments={"ttl_ms": 600}, user=None
    ).task
    assert task is not None
    run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).expired)
    task.refresh_from_db()
    assert task.status == "working" and task.expired and "-32602" in task.last_error
    assert task.events.filter(source="local", note__startswith="expired").exists()
    assert cli("tasks", "show", str(task.pk))["expired"] is True


def test_polls_follow_the_server_interval_and_unchanged_polls_write_nothing(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    task = services.call_start(
        server=demo_registered,
        tool="run_forever",
        arguments={"delay": 30, "poll_interval_ms": 300},
        user=None,
    ).task
    assert task is not None
    run_worker(0.5, listen=False)  # settle: the first poll may see the first tick
    events_before = task.events.count()
    demo_server.clear()
    began = time.monotonic()

    def polled_eight_times() -> bool:
        return demo_server.method_counts().get("tasks/get", 0) >= 8

    writes = count_task_writes(lambda: run_worker_until(polled_eight_times, timeout=30, listen=False))
    took = time.monotonic() - began
    polls = demo_server.method_counts().get("tasks/get", 0)
    # Never faster than the server's 300 ms (-10 % jitter); a loaded machine only makes polls later.
    assert polls <= took / 0.27 + 1, (polls, took)
    assert task.events.count() == events_before
    assert writes == [], writes
    services.task_cancel(task=task, user=None)


def count_task_writes(action: Callable[[], object]) -> list[str]:
    """Rows the mirror wrote during `action`, seen by database triggers (lease bookkeeping excluded)."""
    watched = "status, status_message, raw, result, error, last_seen_at, updated_at_raw, last_error"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_write_log (what TEXT)")
        cursor.execute("DELETE FROM bench_write_log")
        cursor.execute(
            f"CREATE TRIGGER IF NOT EXISTS log_task_update AFTER UPDATE OF {watched} ON tasksapp_remotetask "
            "BEGIN INSERT INTO bench_write_log VALUES ('task ' || NEW.id); END"
        )
        for table in ("tasksapp_taskevent", "tasksapp_inputrequest"):
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS log_{table} AFTER INSERT ON {table} "
                f"BEGIN INSERT INTO bench_write_log VALUES ('{table}'); END"
            )
    try:
        action()
        with connection.cursor() as cursor:
            cursor.execute("SELECT what FROM bench_write_log")
            return [row[0] for row in cursor.fetchall()]
    finally:
        with connection.cursor() as cursor:
            for trigger in ("log_task_update", "log_tasksapp_taskevent", "log_tasksapp_inputrequest"):
                cursor.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            cursor.execute("DROP TABLE IF EXISTS bench_write_log")


def test_a_server_outage_backs_off_is_recorded_and_recovers(
    transactional_db: None, demo_server: RunningPeer
) -> None:
    with outage_proxy(demo_server.url) as proxy:
        server = services.server_create(name="flaky", url=proxy.url(), headers={}, user=None)
        task = services.call_start(
            server=server, tool="slow_count", arguments={"n": 40, "delay": 0.1}, user=None
        ).task
        assert task is not None

        async def scenario() -> Worker:
            worker = Worker(refresh_seconds=0.2, listen=False)
            runner = asyncio.create_task(worker.run())
            await wait_for(lambda: task.events.filter(source="poll").exists(), 15)
            proxy.down()  # after the worker has polled through the proxy at least once
            await wait_for(lambda: McpServer.objects.get(pk=server.pk).consecutive_failures >= 2, 15)
            outage = await sync_to_async(McpServer.objects.get)(pk=server.pk)
            assert outage.health == "backing off" and "cannot reach" in outage.last_error
            assert not runner.done()
            proxy.up()
            await wait_for(lambda: McpServer.objects.get(pk=server.pk).consecutive_failures == 0, 20)
            await wait_for(lambda: RemoteTask.objects.get(pk=task.pk).status == "completed", 20)
            worker.stop()
            await runner
            return worker

        worker = asyncio.run(scenario())
    recovered = McpServer.objects.get(pk=server.pk)
    assert recovered.health == "healthy" and recovered.last_error  # the outage stays on record
    assert worker.stats.errors >= 2


async def wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await sync_to_async(condition)():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.1)


def test_push_lands_in_the_mirror_and_polls_fall(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    def run(listen: bool) -> tuple[int, RemoteTask]:
        task = services.call_start(
            server=demo_registered, tool="slow_count", arguments={"n": 8, "delay": 0.25}, user=None
        ).task
        assert task is not None
        before = demo_server.method_counts().get("tasks/get", 0)
        run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).status == "completed", listen=listen)
        return demo_server.method_counts().get("tasks/get", 0) - before, task

    polled_only, _ = run(listen=False)
    with_push, pushed = run(listen=True)
    sources = set(pushed.events.values_list("source", flat=True))
    assert "push" in sources, sources
    assert with_push < polled_only, (with_push, polled_only)
    assert McpServer.objects.get(pk=demo_registered.pk).listen_supported is True


def test_a_server_without_listen_is_simply_polled(fastmcp_registered: McpServer) -> None:
    task = services.call_start(
        server=fastmcp_registered, tool="slow_count", arguments={"n": 10, "delay": 0.3}, user=None
    ).task
    assert task is not None
    run_worker_until(
        lambda: (
            RemoteTask.objects.get(pk=task.pk).status == "completed"
            and McpServer.objects.get(pk=fastmcp_registered.pk).listen_supported is False
        )
    )
    assert set(task.events.values_list("source", flat=True)) <= {"create", "poll"}


def start_worker_process(env: dict[str, str], name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", "--name", name],
        cwd=ROOT,
        env={**env, "MCP_LEASE_SECONDS": "3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_kill_9_loses_nothing_and_sends_no_answer_twice(
    demo_registered: McpServer, demo_server: RunningPeer, db_env: dict[str, str]
) -> None:
    tasks = [
        services.call_start(
            server=demo_registered, tool=tool, arguments={"delay": 0.3, "n": 12}, user=None
        ).task
        for tool in ["slow_count"] * 10 + ["ask_two"] * 10
    ]
    ids = [task.pk for task in tasks if task is not None]
    assert len(ids) == 20
    worker = start_worker_process(db_env, "crashy")
    deadline = time.monotonic() + 30
    while InputRequest.objects.filter(state="open").count() < 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert InputRequest.objects.filter(state="open").count() == 20, "the questions never all opened"
    worker.send_signal(signal.SIGKILL)  # mid-flight: slow counts still working, questions open
    worker.wait()
    assert RemoteTask.objects.filter(pk__in=ids).exclude(status__in=("completed",)).count() >= 10
    demo_server.clear()
    for request in InputRequest.objects.filter(state="open").select_related("task"):
        response = {"action": "accept", "content": {"answer": "yes"}}
        services.task_answer(task=request.task, key=request.key, response=response, user=None)
    restarted = start_worker_process(db_env, "phoenix")
    try:
        deadline = time.monotonic() + 45
        while RemoteTask.objects.filter(pk__in=ids, status="completed").count() < 20:
            assert time.monotonic() < deadline, list(RemoteTask.objects.values_list("status", flat=True))
            time.sleep(0.2)
    finally:
        restarted.send_signal(signal.SIGTERM)
        output, _ = restarted.communicate(timeout=20)
    assert restarted.returncode == 0, output
    answered = [
        key
        for r in demo_server.received()
        if r["method"] == "tasks/update"
        for key in r["body"]["params"]["inputResponses"]
    ]
    assert len(answered) == 20 and len(set(answered)) == 20  # every key once, none twice
    assert not RemoteTask.objects.filter(pk__in=ids, expired=True).exists()
    assert WorkerHeartbeat.objects.get(worker="phoenix").stopped_at is not None
    assert not RemoteTask.objects.filter(leased_by="phoenix").exists()  # SIGTERM released every lease
    # (the killed worker may have finished a task without getting to release it: harmless, it is done)
    assert not RemoteTask.objects.active().exclude(leased_by="").exists()


# --- error paths ----------------------------------------------------------------------------------


def failing(code: int = -32603) -> Callable[[dict[str, Any]], web.StreamResponse]:
    return lambda message: hostile.json_reply(hostile.rpc_error(message, code, "it broke"))


def test_the_worker_waits_as_long_as_retry_after_asks(transactional_db: None) -> None:
    polls: list[tuple[float, int]] = []

    def busy_once(message: dict[str, Any]) -> web.StreamResponse:
        status = 503 if not polls else 200
        polls.append((time.monotonic(), status))
        if status == 503:
            return hostile.raw_reply(
                b"busy", status=503, content_type="text/plain", headers={"Retry-After": "3"}
            )
        answer = {
            "resultType": "complete",
            **hostile.task(status="completed", result={"content": []}, createdAt=timezone.now().isoformat()),
        }
        return hostile.json_reply(hostile.response(message, answer))

    server = scripted({"tasks/get": busy_once}, pollIntervalMs=200)
    try:
        task = started_on(server)
        # Stop on what the product recorded (the task completed, the server healthy again), not on
        # what the server saw: the second poll arrives before the worker writes its recovery.
        run_worker_until(
            lambda: (
                RemoteTask.objects.get(pk=task.pk).status == "completed"
                and McpServer.objects.get(pk=task.server_id).consecutive_failures == 0
            ),
            timeout=15,
            listen=False,
        )
    finally:
        server.close()
    (refused_at, refused), (next_at, _) = polls[:2]
    assert refused == 503
    assert next_at - refused_at >= 3.0, next_at - refused_at  # the 1 s back-off would come sooner
    assert McpServer.objects.get(pk=task.server_id).consecutive_failures == 0  # then it recovered


def test_a_task_expires_when_its_ttl_passes_while_its_server_is_unreachable(
    transactional_db: None, settings: object
) -> None:
    settings.MCP_TTL_GRACE_MS = 0  # type: ignore[attr-defined]
    server = scripted({}, createdAt="2020-01-01T00:00:00Z", ttlMs=1000)
    task = started_on(server)
    server.close()  # gone: connections are refused
    run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).expired, timeout=15, listen=False)
    task.refresh_from_db()
    assert "TTL passed while the server was unreachable" in task.last_error, task.last_error
    assert task.events.filter(source="local", note__startswith="expired").count() == 1


def test_a_failed_answer_send_goes_back_to_open(transactional_db: None) -> None:
    server = scripted({"tasks/update": failing()}, status="input_required", inputRequests={"who": QUESTION})
    try:
        task = started_on(server)
        with pytest.raises(services.RemoteFailed, match="not delivered"):
            services.task_answer(task=task, key="who", response={"action": "decline"}, user=None)
        assert server.count("tasks/update") == 1
    finally:
        server.close()
    request = InputRequest.objects.get(task=task)
    assert request.state == "open" and "-32603" in request.last_error
    assert OperatorAction.objects.filter(action="decline", ok=False).count() == 1
    assert not task.events.filter(note__contains="declined").exists()


def test_stuck_answers_are_resent_once(demo_registered: McpServer, demo_server: RunningPeer) -> None:
    task = services.call_start(
        server=demo_registered, tool="ask_form", arguments={"delay": 0}, user=None
    ).task
    assert task is not None
    run_worker_until(lambda: InputRequest.objects.filter(task=task, state="open").exists(), listen=False)
    # The state a sender leaves when it dies between claiming an answer and sending it.
    long_ago = timezone.now() - timedelta(minutes=2)
    InputRequest.objects.filter(task=task).update(
        state="sending", response={"action": "decline"}, answered_at=long_ago
    )
    demo_server.clear()
    assert services.input_resend_stuck(older_than_seconds=60) == 1
    assert services.input_resend_stuck(older_than_seconds=60) == 0
    assert demo_server.method_counts().get("tasks/update") == 1
    assert InputRequest.objects.get(task=task).state == "answered"
    run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).status == "completed", listen=False)


def test_a_per_task_error_is_recorded_and_the_server_stays_healthy(transactional_db: None) -> None:
    server = scripted({"tasks/get": failing()})
    try:
        task = started_on(server)
        run_worker_until(lambda: bool(RemoteTask.objects.get(pk=task.pk).last_error), listen=False)
    finally:
        server.close()
    task.refresh_from_db()
    assert "-32603" in task.last_error and "it broke" in task.last_error
    assert not task.expired and task.status == "working"
    registered = McpServer.objects.get(pk=task.server_id)
    assert registered.consecutive_failures == 0 and registered.health == "healthy"


def test_a_failed_cancel_is_rolled_back(transactional_db: None) -> None:
    server = scripted({"tasks/cancel": failing()})
    try:
        task = started_on(server)
        with pytest.raises(services.RemoteFailed, match="Could not cancel"):
            services.task_cancel(task=task, user=None)
        assert server.count("tasks/cancel") == 1
    finally:
        server.close()
    task.refresh_from_db()
    assert task.cancel_requested_at is None and task.display_status == "working"
    assert not task.events.filter(note__startswith="cancel requested").exists()
    assert list(OperatorAction.objects.filter(action="cancel").values_list("ok", flat=True)) == [False]


def test_a_task_past_its_ttl_is_looked_at_at_its_servers_pace_even_under_a_stream(settings: Any) -> None:
    # A task a healthy stream covers is polled only as a slow safety net. Past its TTL, a server
    # that still knew it at the first look drops it soon, and no stream says so: the mirror
    # waited the safety net's 30 s to see it (tests/test_counts.py, once in about 15 runs).
    from tasksapp.engine.tracking import TrackedTask

    settings.MCP_POLL_SAFETY_NET_MS, settings.MCP_POLL_JITTER = 30_000, 0
    worker = Worker(refresh_seconds=0.2, listen=False)
    task = TrackedTask(1, 1, "t", None, poll_interval_ms=500, ttl_deadline=time.time() + 0.3, pushed=True)
    assert worker.next_delay(task) == pytest.approx(0.4, abs=0.05)  # just after the TTL
    task.ttl_deadline = time.time() - 1
    assert worker.next_delay(task) == pytest.approx(max(0.5, settings.MCP_POLL_FLOOR_MS / 1000))
    task.ttl_deadline = None
    assert worker.next_delay(task) == pytest.approx(30.0)  # no TTL: the safety net
