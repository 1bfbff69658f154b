"""subscriptions/listen: the ack, one notifications/tasks frame per change, graceful ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tasksapp.demoserver import RunningServer, run_in_thread

from . import schemas
from .wire import SUBSCRIPTION, SseEvent, Wire, envelope, sse_events


def listen_body(request_id: Any, notifications: dict[str, Any], *, tasks: bool = True) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": envelope(tasks=tasks)},
    }


@contextmanager
def listening(
    wire: Wire, notifications: dict[str, Any], request_id: Any = "listen-1"
) -> Iterator[Iterator[SseEvent]]:
    body = listen_body(request_id, notifications)
    headers = wire.headers("subscriptions/listen")
    with wire.http.stream("POST", wire.url, json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        yield sse_events(response)


def next_message(events: Iterator[SseEvent]) -> dict[str, Any]:
    for event in events:
        if event.message is not None:
            return event.message
    raise AssertionError("stream ended")


def open_streams(wire: Wire) -> int:
    return int(wire.debug("stats")["listen_streams_open"])


def wait_until_closed(wire: Wire) -> None:
    deadline = time.monotonic() + 3
    while open_streams(wire):
        assert time.monotonic() < deadline, "listen stream still open"
        time.sleep(0.02)


def test_ack_echoes_existing_task_ids_and_requested_flags(wire: Wire) -> None:
    task_id = wire.start("run_forever", {"delay": 5})["taskId"]
    wanted = {
        "taskIds": [task_id, "unknown-id", task_id],
        "toolsListChanged": True,
        "promptsListChanged": False,
    }
    with listening(wire, wanted, request_id=77) as events:
        ack = next_message(events)
        schemas.core("SubscriptionsAcknowledgedNotification", ack)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}
        assert ack["params"]["_meta"] == {SUBSCRIPTION: 77}
    wire.cancel(task_id)


def test_every_change_is_pushed_as_a_detailed_task(wire: Wire) -> None:
    task_id = wire.start("slow_count", {"n": 3, "delay": 0.2})["taskId"]
    with listening(wire, {"taskIds": [task_id]}) as events:
        next_message(events)
        pushed: list[dict[str, Any]] = []
        while not pushed or pushed[-1]["status"] != "completed":
            frame = next_message(events)
            schemas.tasks("TaskStatusNotification", frame)
            pushed.append(frame["params"])
        assert all(p["_meta"] == {SUBSCRIPTION: "listen-1"} for p in pushed)
        assert all("resultType" not in p for p in pushed)
        messages = [p.get("statusMessage") for p in pushed]
        assert messages[-3:] == ["counted 2/3", "counted 3/3", "counted 3/3"]
        assert pushed[-1]["result"]["structuredContent"] == {"count": 3}
        stamps = [p["lastUpdatedAt"] for p in pushed]
        assert stamps == sorted(set(stamps))
        final = {k: v for k, v in wire.get(task_id).items() if k not in ("resultType", "_meta")}
        assert {k: v for k, v in pushed[-1].items() if k != "_meta"} == final


def test_input_required_and_partial_answers_are_pushed(wire: Wire) -> None:
    task_id = wire.start("ask_two", {"delay": 0.5})["taskId"]
    with listening(wire, {"taskIds": [task_id]}) as events:
        next_message(events)
        asking = next_message(events)["params"]
        assert asking["status"] == "input_required"
        first, second = sorted(asking["inputRequests"])
        wire.update(task_id, {first: {"action": "accept", "content": {"color": "red"}}})
        assert list(next_message(events)["params"]["inputRequests"]) == [second]
        wire.update(task_id, {second: {"action": "decline"}})
        statuses = [next_message(events)["params"]["status"]]
        while statuses[-1] != "completed":
            statuses.append(next_message(events)["params"]["status"])
        assert statuses[0] == "working"


def test_failed_and_cancelled_are_pushed(wire: Wire) -> None:
    failing = wire.start("fail_rpc", {"delay": 0.5})["taskId"]
    forever = wire.start("run_forever", {"delay": 5})["taskId"]
    with listening(wire, {"taskIds": [failing, forever]}) as events:
        next_message(events)
        failed = next_message(events)["params"]
        assert (failed["taskId"], failed["status"]) == (failing, "failed")
        assert failed["error"]["code"] == -32603
        wire.cancel(forever)
        cancelled = next_message(events)["params"]
        assert (cancelled["taskId"], cancelled["status"]) == (forever, "cancelled")


def test_unsubscribed_tasks_are_not_pushed(wire: Wire) -> None:
    watched = wire.start("slow_count", {"n": 1, "delay": 0.3})["taskId"]
    wire.start("slow_count", {"n": 3, "delay": 0.01})
    with listening(wire, {"taskIds": [watched]}) as events:
        next_message(events)
        while (frame := next_message(events)["params"])["status"] != "completed":
            assert frame["taskId"] == watched
        assert frame["taskId"] == watched


def test_keepalive_pings_arrive_between_frames(wire: Wire) -> None:
    with listening(wire, {"toolsListChanged": True}) as events:
        next_message(events)
        assert next(events).comment == "ping"


def test_task_ids_need_the_tasks_capability(wire: Wire) -> None:
    body = listen_body(1, {"taskIds": ["x"]}, tasks=False)
    response = wire.http.post(wire.url, json=body, headers=wire.headers("subscriptions/listen"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}


@pytest.mark.parametrize("notifications", [None, {"taskIds": "abc"}, {"taskIds": [1]}])
def test_malformed_filters_are_invalid_params(wire: Wire, notifications: Any) -> None:
    body = listen_body(1, notifications)
    response = wire.http.post(wire.url, json=body, headers=wire.headers("subscriptions/listen"))
    assert response.json()["error"]["code"] == -32602


def test_client_disconnect_ends_the_subscription(wire: Wire) -> None:
    with listening(wire, {"toolsListChanged": True}) as events:
        next_message(events)
        assert open_streams(wire) >= 1
    wait_until_closed(wire)


def test_debug_close_streams_ends_gracefully_with_the_final_response(wire: Wire) -> None:
    with listening(wire, {"toolsListChanged": True}, request_id="bye") as events:
        next_message(events)
        assert wire.debug("close-streams", method="POST")["closed"] >= 1
        final = next_message(events)
        assert final["id"] == "bye"
        assert final["result"]["resultType"] == "complete"
        assert final["result"]["_meta"][SUBSCRIPTION] == "bye"
        schemas.core("SubscriptionsListenResultResponse", final)
        assert [e for e in events if e.message] == []
    wait_until_closed(wire)


def test_server_shutdown_ends_streams_with_the_final_response() -> None:
    server: RunningServer = run_in_thread(keepalive_seconds=0.2)
    wire = Wire(server.url)
    try:
        with listening(wire, {"toolsListChanged": True}, request_id=9) as events:
            next_message(events)
            stopper = threading.Thread(target=server.stop)
            stopper.start()
            final = next_message(events)
            assert final == {
                "jsonrpc": "2.0",
                "id": 9,
                "result": {
                    "resultType": "complete",
                    "_meta": {
                        SUBSCRIPTION: 9,
                        "io.modelcontextprotocol/serverInfo": {
                            "name": "mcp-tasks-demoserver",
                            "version": "1.0.0",
                        },
                    },
                },
            }
            stopper.join(10)
            assert not stopper.is_alive()
    finally:
        wire.close()
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url, json={})
