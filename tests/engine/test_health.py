"""Health per (worker, server): each worker's view is kept apart, the server's row shows the worst of
the live workers' with who is behind, and a task is stale when the worker holding it fails. The
worker side (a back-off yielding to another worker's answer) is driven in tests/e2e/test_worker_health.py
with two worker processes; here the services and one worker against a proxy at the network edge.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from tasksapp import counts, services
from tasksapp.engine import store
from tasksapp.models import McpServer, RemoteTask, ServerHealth, WorkerHeartbeat
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until
from tests.support.faults import outage_proxy

pytestmark = pytest.mark.django_db(transaction=True)


def server() -> McpServer:
    return McpServer.objects.create(name="shared", url="http://127.0.0.1:9/mcp")


def held_by(server: McpServer, worker: str) -> RemoteTask:
    task = RemoteTask(server=server, tool_name="run_forever", status="working", leased_by=worker)
    task.set_remote_id(f"{worker}-{RemoteTask.objects.count()}")
    task.save()
    return task


def fail(server: McpServer, worker: str, failures: int = 1, backoff_seconds: float = 60) -> None:
    until = timezone.now() + timedelta(seconds=backoff_seconds)
    services.server_record_failure(
        server_id=server.pk,
        worker=worker,
        error=f"{worker} cannot reach it",
        failures=failures,
        backoff_until=until,
    )


def succeed(server: McpServer, worker: str) -> None:
    services.server_record_success(server_id=server.pk, worker=worker, now=timezone.now())


def fresh(server: McpServer) -> McpServer:
    return McpServer.objects.get(pk=server.pk)


def test_one_workers_recovery_does_not_hide_anothers_back_off() -> None:
    shared = server()
    fail(shared, "A", backoff_seconds=1)
    fail(shared, "B", failures=4, backoff_seconds=275)
    succeed(shared, "A")
    row = fresh(shared)
    assert row.health == "backing off" and row.consecutive_failures == 4
    assert row.failing_workers == ["B"] and row.workers_reporting == 2
    assert row.last_error == "B cannot reach it" and row.failing_since is not None
    assert row.backoff_until is not None and row.backoff_until > timezone.now() + timedelta(seconds=200)
    succeed(shared, "B")
    row = fresh(shared)
    assert (row.health, row.consecutive_failures, row.failing_workers, row.failing_since) == (
        "healthy",
        0,
        [],
        None,
    )


def test_a_task_is_stale_when_the_worker_holding_it_fails_and_not_when_another_does() -> None:
    shared = server()
    mine, theirs = held_by(shared, "A"), held_by(shared, "B")
    nobody = held_by(shared, "")
    succeed(shared, "A")
    fail(shared, "B")
    listed = {task.pk: task for task in RemoteTask.objects.for_list()}
    assert listed[theirs.pk].stale_since is not None and listed[mine.pk].stale_since is None
    assert RemoteTask.objects.get(pk=theirs.pk).stale_since is not None  # without the annotation too
    assert RemoteTask.objects.get(pk=mine.pk).stale_since is None
    # A task nobody holds goes by the server's worst view (someone cannot reach it).
    assert RemoteTask.objects.get(pk=nobody.pk).stale_since is not None
    stale = set(RemoteTask.objects.with_display_status("stale").values_list("pk", flat=True))
    assert stale == {theirs.pk, nobody.pk}
    assert counts.stale_held() == 2
    detail = RemoteTask.objects.for_detail().get(pk=theirs.pk)
    assert detail.stale_error == "B cannot reach it" and detail.stale_failing_since is not None


def test_a_stopped_workers_view_stops_counting_and_the_last_word_stays_without_any() -> None:
    shared = server()
    for name in ("A", "B"):
        store.heartbeat(name, started=timezone.now(), held=0, polls=0, pushes=0, streams=0)
    fail(shared, "A")
    succeed(shared, "B")
    assert fresh(shared).failing_workers == ["A"]
    store.heartbeat_stop("A")
    assert not ServerHealth.objects.filter(worker="A").exists()
    assert (fresh(shared).health, fresh(shared).workers_reporting) == ("healthy", 1)
    fail(shared, "B")
    store.heartbeat_stop("B")  # nobody is left to say otherwise: the server keeps its last word
    assert fresh(shared).failing_workers == ["B"] and fresh(shared).consecutive_failures == 1


def test_a_vanished_workers_view_is_ignored_and_dropped_once_it_holds_nothing() -> None:
    shared = server()
    store.heartbeat("A", started=timezone.now(), held=0, polls=0, pushes=0, streams=0)
    store.heartbeat("B", started=timezone.now(), held=0, polls=0, pushes=0, streams=0)
    task = held_by(shared, "B")
    fail(shared, "B")
    # B stops beating (killed): past its lease window its view no longer makes the server failing.
    WorkerHeartbeat.objects.filter(worker="B").update(last_beat_at=timezone.now() - timedelta(hours=1))
    succeed(shared, "A")
    assert fresh(shared).health == "healthy" and fresh(shared).failing_workers == []
    assert RemoteTask.objects.get(pk=task.pk).stale_since is not None  # nobody polls what B holds
    RemoteTask.objects.filter(pk=task.pk).update(leased_by="A")  # A claimed it after the lease lapsed
    fail(shared, "A")
    assert set(ServerHealth.objects.values_list("worker", flat=True)) == {"A"}


def test_last_confirmed_is_when_the_server_answered_not_when_the_worker_wrote_it_down(
    demo_server: RunningPeer,
) -> None:
    """A task page must not say "failing since 16:15:58 … not confirmed since 16:16:01": the
    confirmations of a heartbeat are written at the heartbeat, with the time of each answer."""
    with outage_proxy(demo_server.url) as proxy:
        flaky = services.server_create(name="flaky", url=proxy.url(), headers={}, user=None)
        arguments = {"delay": 30, "poll_interval_ms": 200}
        task = services.call_start(server=flaky, tool="run_forever", arguments=arguments, user=None).task
        assert task is not None
        polls_before = demo_server.method_counts().get("tasks/get", 0)
        cut: list[bool] = []

        def failing() -> bool:
            if not cut and demo_server.method_counts().get("tasks/get", 0) >= polls_before + 3:
                proxy.down()  # answered a few times since the last heartbeat: now the server fails
                cut.append(True)
            return bool(cut) and fresh(flaky).failing_since is not None

        # Heartbeats far apart: the answers wait in memory, as in a busy worker, and are written
        # after the failure (at the latest when the worker stops).
        run_worker_until(failing, timeout=30, listen=False, heartbeat_seconds=10)
        row = RemoteTask.objects.get(pk=task.pk)
        failing_since = fresh(flaky).failing_since
        assert failing_since is not None and row.last_confirmed_at is not None
        assert row.last_confirmed_at <= failing_since, (row.last_confirmed_at, failing_since)
        assert row.stale_since == row.last_confirmed_at
