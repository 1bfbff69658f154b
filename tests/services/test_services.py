"""The services are the only writers: checked against a real database and the reference server."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from tasksapp import events, services
from tasksapp.demoserver.tools import TOOLS
from tasksapp.lib import crypto
from tasksapp.mcpclient import CompletedTask, DetailedTask, parse_detailed_task
from tasksapp.models import InputRequest, McpServer, OperatorAction, RemoteTask, TaskEvent
from tasksapp.services.tasks import task_note
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot(task: RemoteTask, **fields: object) -> DetailedTask:
    raw = {
        "taskId": task.remote_id,
        "status": "working",
        "createdAt": task.created_at_raw,
        "lastUpdatedAt": stamp(),  # after the stamp call_start stored
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_interval_ms,
        **fields,
    }
    return parse_detailed_task(raw)


def stamp(seconds: float = 0) -> str:
    """A lastUpdatedAt that many seconds from now (the server's stamps only move forward)."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def test_server_create_discovers_then_saves_with_credentials_encrypted(
    transactional_db: None, demo_server: RunningPeer
) -> None:
    server = services.server_create(
        name="demo", url=demo_server.url, headers={"Authorization": "Bearer s3cret-token-value"}, user=None
    )
    assert (server.era, server.tasks_supported) == ("modern", True)
    assert len(server.tools) == len(TOOLS)
    stored = McpServer.objects.values_list("headers_encrypted", flat=True).get()
    assert "s3cret" not in stored
    assert server.masked_headers == {"Authorization": "••••••••alue"}
    assert demo_server.last_request("tools/list")["headers"]["authorization"] == "Bearer s3cret-token-value"
    assert OperatorAction.objects.get().action == "server_add"


def test_server_create_refuses_an_unreachable_server(transactional_db: None) -> None:
    with pytest.raises(services.RemoteFailed, match="Discovery failed"):
        services.server_create(name="gone", url="http://127.0.0.1:9/mcp", headers={}, user=None)
    assert not McpServer.objects.exists()


def test_call_start_persists_a_task_with_its_id_encrypted(demo_registered: McpServer) -> None:
    started = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None)
    assert started.outcome == "task" and started.task is not None
    task = RemoteTask.objects.get()
    assert task.remote_id not in str(RemoteTask.objects.values().get())
    assert task.remote_id_hash == crypto.fingerprint(task.remote_id)
    assert [e.source for e in task.events.all()] == ["create"]
    services.task_cancel(task=task, user=None)


def test_call_start_returns_an_immediate_result(demo_registered: McpServer) -> None:
    started = services.call_start(server=demo_registered, tool="echo", arguments={"text": "hi"}, user=None)
    assert started.outcome == "result" and started.result is not None
    assert started.result["content"][0]["text"] == "hi"
    assert not RemoteTask.objects.exists()


def test_input_before_the_task_is_kept_and_answering_retries_the_call(demo_registered: McpServer) -> None:
    started = services.call_start(server=demo_registered, tool="mrtr_then_task", arguments={}, user=None)
    assert started.outcome == "input_required" and started.pending is not None
    pending = started.pending
    [key] = pending.input_requests
    assert pending.request_state and pending.request_state not in str(pending.request_state_encrypted)
    done = services.pending_call_answer(
        pending=pending, responses={key: {"action": "accept", "content": {"name": "Ada"}}}, user=None
    )
    assert done.outcome == "task" and done.task is not None
    pending.refresh_from_db()
    assert (pending.state, pending.task_id) == ("done", done.task.pk)
    with pytest.raises(services.NotAllowed):
        services.pending_call_answer(pending=pending, responses={}, user=None)


def test_apply_snapshot_is_idempotent_and_writes_only_real_changes(task: RemoteTask) -> None:
    moved = snapshot(task, statusMessage="step 2")
    assert services.task_apply_snapshot(task=task, snapshot=moved, source="poll") is True
    assert services.task_apply_snapshot(task=task, snapshot=moved, source="poll") is False
    later = snapshot(task, statusMessage="step 2", lastUpdatedAt=stamp(seconds=1))
    assert services.task_apply_snapshot(task=task, snapshot=later, source="push") is False
    assert [e.status_message for e in task.events.all()][-1] == "step 2"
    assert task.events.count() == 2


def test_a_poll_overtaken_by_a_newer_answer_changes_nothing(task: RemoteTask) -> None:
    """A tasks/get sent before an answer returns after the push that said the answer was taken."""
    ask = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    asked = snapshot(task, status="input_required", inputRequests={"k1": ask}, lastUpdatedAt=stamp(1))
    answered = snapshot(task, status="working", statusMessage="got it", lastUpdatedAt=stamp(3))
    assert services.task_apply_snapshot(task=task, snapshot=asked, source="poll")
    assert services.task_apply_snapshot(task=task, snapshot=answered, source="push")
    assert not services.task_apply_snapshot(task=task, snapshot=asked, source="poll")  # the late poll
    task.refresh_from_db()
    assert (task.status, task.status_message) == ("working", "got it")
    assert [e.status for e in task.events.all()] == ["working", "input_required", "working"]
    done = snapshot(task, status="completed", result={"content": []}, lastUpdatedAt=stamp(2))
    assert services.task_apply_snapshot(task=task, snapshot=done, source="poll")  # final is never stale


def test_a_note_says_the_status_the_mirror_holds_not_the_callers_copy(task: RemoteTask) -> None:
    """An answer's note written after the push that reported the answer taken says "working"."""
    ask = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    services.task_apply_snapshot(
        task=task, snapshot=snapshot(task, status="input_required", inputRequests={"k": ask}), source="poll"
    )
    stale_copy = RemoteTask.objects.get(pk=task.pk)  # what the answer view loaded
    services.task_apply_snapshot(task=task, snapshot=snapshot(task, lastUpdatedAt=stamp(1)), source="push")
    note = task_note(task=stale_copy, source="operator", note="demo answered elicitation/create")
    assert (stale_copy.status, note.status) == ("input_required", "working")


def test_a_terminal_state_is_never_left(task: RemoteTask) -> None:
    done = snapshot(task, status="completed", result={"content": [], "isError": True})
    assert isinstance(done, CompletedTask)
    assert services.task_apply_snapshot(task=task, snapshot=done, source="poll")
    assert not services.task_apply_snapshot(task=task, snapshot=snapshot(task), source="push")
    task.refresh_from_db()
    assert (task.status, task.is_tool_error, task.display_status) == (
        "completed",
        True,
        "completed with tool error",
    )


def test_input_requests_are_one_row_per_key_and_vanished_keys_close(task: RemoteTask) -> None:
    ask = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    two = snapshot(task, status="input_required", inputRequests={"k1": ask, "k2": ask})
    services.task_apply_snapshot(task=task, snapshot=two, source="poll")
    services.task_apply_snapshot(task=task, snapshot=two, source="push")
    assert InputRequest.objects.filter(task=task).count() == 2
    one = snapshot(task, status="input_required", inputRequests={"k2": ask})
    assert services.task_apply_snapshot(task=task, snapshot=one, source="poll")
    states = dict(InputRequest.objects.values_list("key_hash", "state"))
    assert states == {crypto.fingerprint("k1"): "gone", crypto.fingerprint("k2"): "open"}


def test_two_concurrent_answers_send_exactly_one_update(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    task = services.call_start(
        server=demo_registered, tool="ask_form", arguments={"delay": 0.05}, user=None
    ).task
    assert task is not None
    run_worker_until(lambda: task.input_requests.filter(state="open").exists())
    key = task.input_requests.get().key
    before = demo_server.method_counts().get("tasks/update", 0)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def answer() -> None:
        barrier.wait()
        try:
            services.task_answer(task=task, key=key, response={"action": "decline"}, user=None)
            outcomes.append("sent")
        except services.NotAllowed as exc:
            outcomes.append(str(exc))
        finally:
            from django.db import connection

            connection.close()

    threads = [threading.Thread(target=answer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("sent") == 1
    assert "already answered" in next(o for o in outcomes if o != "sent")
    assert demo_server.method_counts()["tasks/update"] - before == 1
    assert InputRequest.objects.get().state == "answered"
    assert OperatorAction.objects.filter(action="decline").count() == 1


def test_cancel_shows_cancel_requested_until_the_server_finishes(demo_registered: McpServer) -> None:
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None
    services.task_cancel(task=task, user=None)
    task.refresh_from_db()
    assert task.cancel_requested_at is not None and task.display_status == "cancel requested"
    assert TaskEvent.objects.filter(task=task, source="operator").exists()
    run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).status == "cancelled")
    with pytest.raises(services.NotAllowed):
        services.task_cancel(task=task, user=None)


def test_changes_are_published_after_commit(demo_registered: McpServer) -> None:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.TASKS, channel)
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None
    message = async_to_sync(layer.receive)(channel)
    # Numbered per publisher and group (src, seq) so a socket can tell a message was dropped.
    assert (message["type"], message["id"], message["seq"] > 0) == ("task.changed", task.pk, True)
    services.task_cancel(task=task, user=None)
