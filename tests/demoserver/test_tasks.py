"""Task lifecycles without client input: progress, failures, cancel, expiry, intervals."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from datetime import datetime, timedelta

import pytest

from . import schemas
from .wire import TERMINAL, Wire


def test_slow_count_reports_each_step_and_completes(wire: Wire) -> None:
    # Each step lasts 0.3 s, so a poll every 10 ms sees a step between the first and the last even
    # on a loaded machine (0.05 s steps: a slow poll once missed "counted 1/3" in CI).
    created = wire.start("slow_count", {"n": 3, "delay": 0.3})
    schemas.tasks("CreateTaskResult", created)
    assert created["status"] == "working"
    assert created["statusMessage"] == "counted 0/3"
    assert created["pollIntervalMs"] == 100
    assert created["ttlMs"] == 900_000
    assert len(created["taskId"]) >= 43
    seen = {created["statusMessage"]}
    while (task := wire.get(created["taskId"]))["status"] != "completed":
        seen.add(task["statusMessage"])
        time.sleep(0.01)
    schemas.tasks("GetTaskResult", task)
    assert task["resultType"] == "complete"
    assert seen <= {"counted 0/3", "counted 1/3", "counted 2/3", "counted 3/3"}, seen
    assert seen & {"counted 1/3", "counted 2/3"}, seen  # a step between the first and the last
    assert task["result"]["content"] == [{"type": "text", "text": "counted to 3"}]
    assert task["result"]["structuredContent"] == {"count": 3}
    assert task["result"]["isError"] is False


def test_tasks_get_works_right_after_creation(wire: Wire) -> None:
    created = wire.start("slow_count", {"n": 1, "delay": 0.05})
    task = wire.get(created["taskId"])
    assert {k: task[k] for k in ("taskId", "createdAt", "ttlMs")} == {
        k: created[k] for k in ("taskId", "createdAt", "ttlMs")
    }


def test_last_updated_at_moves_only_on_real_changes(wire: Wire) -> None:
    created = wire.start("slow_count", {"n": 1, "delay": 0.3})
    first, second = wire.get(created["taskId"]), wire.get(created["taskId"])
    assert first["lastUpdatedAt"] == second["lastUpdatedAt"] == created["lastUpdatedAt"]
    done = wire.wait_for(created["taskId"], "completed")
    assert done["lastUpdatedAt"] > created["lastUpdatedAt"]
    assert wire.get(created["taskId"])["lastUpdatedAt"] == done["lastUpdatedAt"]
    for stamp in (done["createdAt"], done["lastUpdatedAt"]):
        assert datetime.fromisoformat(stamp).utcoffset() == timedelta(0)


def test_poll_interval_argument_overrides_the_default(wire: Wire) -> None:
    created = wire.start("slow_count", {"n": 0, "poll_interval_ms": 2500})
    assert created["pollIntervalMs"] == 2500


def test_fail_rpc_ends_failed_with_the_error(wire: Wire) -> None:
    task = wire.wait_for(wire.start("fail_rpc", {"delay": 0.05})["taskId"], *TERMINAL)
    schemas.tasks("GetTaskResult", task)
    assert task["status"] == "failed"
    assert task["error"] == {
        "code": -32603,
        "message": "Simulated backend failure",
        "data": {"retryAfterS": 30},
    }
    assert "Simulated backend failure" in task["statusMessage"]
    assert "result" not in task


def test_fail_tool_completes_with_is_error(wire: Wire) -> None:
    task = wire.wait_for(wire.start("fail_tool", {"delay": 0.05})["taskId"], *TERMINAL)
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert task["result"]["content"][0]["type"] == "text"


def test_run_forever_ticks_until_cancelled(wire: Wire) -> None:
    task_id = wire.start("run_forever", {"delay": 0.05})["taskId"]
    deadline = time.monotonic() + 3
    while wire.get(task_id)["statusMessage"] in ("tick 0", "tick 1"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert wire.cancel(task_id)["resultType"] == "complete"
    task = wire.wait_for(task_id, *TERMINAL, timeout=1)
    schemas.tasks("GetTaskResult", task)
    assert task["status"] == "cancelled"
    stamp = task["lastUpdatedAt"]
    time.sleep(0.15)
    assert wire.get(task_id)["lastUpdatedAt"] == stamp


def test_cancel_on_a_terminal_task_changes_nothing(wire: Wire) -> None:
    task_id = wire.start("fail_tool", {"delay": 0})["taskId"]
    done = wire.wait_for(task_id, *TERMINAL)
    assert wire.cancel(task_id) == {"resultType": "complete", "_meta": done["_meta"]}
    assert wire.get(task_id) == done


def test_short_ttl_task_is_deleted_after_its_ttl(wire: Wire) -> None:
    created = wire.start("short_ttl", {"ttl_ms": 300})
    assert created["ttlMs"] == 300
    assert wire.get(created["taskId"])["status"] == "working"
    time.sleep(0.4)
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params = {"taskId": created["taskId"], "inputResponses": {}}
        response = wire.post(method, params, name=created["taskId"])
        assert response.status_code == 400
        assert response.json()["error"] == {
            "code": -32602,
            "message": f"Task {created['taskId']} not found",
        }


def test_changing_interval_moves_200_800_400(wire: Wire) -> None:
    created = wire.start("changing_interval", {"delay": 0.1})
    intervals = [created["pollIntervalMs"]]
    while (task := wire.get(created["taskId"]))["status"] != "completed":
        if task["pollIntervalMs"] != intervals[-1]:
            intervals.append(task["pollIntervalMs"])
            assert f"{task['pollIntervalMs']} ms" in task["statusMessage"]
        time.sleep(0.01)
    assert intervals == [200, 800, 400]


def test_rich_result_carries_every_content_type(wire: Wire) -> None:
    task = wire.wait_for(wire.start("rich_result", {"delay": 0})["taskId"], "completed")
    result = task["result"]
    schemas.core("CallToolResult", result)
    kinds = [block["type"] for block in result["content"]]
    assert {"text", "image", "resource_link", "resource"} <= set(kinds)
    image = next(block for block in result["content"] if block["type"] == "image")
    png = base64.b64decode(image["data"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    length, tag = struct.unpack(">I4s", png[8:16])
    assert (
        tag == b"IHDR"
        and zlib.crc32(png[12 : 16 + length]) == struct.unpack(">I", png[16 + length : 20 + length])[0]
    )
    link = next(block for block in result["content"] if block["type"] == "resource_link")
    assert link["uri"].startswith("https://")
    assert result["structuredContent"]


def test_task_tools_need_the_tasks_capability(wire: Wire) -> None:
    response = wire.post(
        "tools/call", {"name": "slow_count", "arguments": {}}, name="slow_count", tasks=False
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_need_the_tasks_capability(wire: Wire, method: str) -> None:
    task_id = wire.start("slow_count", {"n": 0})["taskId"]
    response = wire.post(method, {"taskId": task_id, "inputResponses": {}}, name=task_id, tasks=False)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32021


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_check_mcp_name_when_present(wire: Wire, method: str) -> None:
    task_id = wire.start("slow_count", {"n": 0})["taskId"]
    params = {"taskId": task_id, "inputResponses": {}}
    assert wire.post(method, params, name="someone-else").json()["error"]["code"] == -32020
    before = wire.debug("stats")["tasks_without_mcp_name"].get(method, 0)
    accepted = wire.post(method, params)
    assert accepted.status_code == 200, accepted.text
    assert wire.debug("stats")["tasks_without_mcp_name"][method] == before + 1


def test_unknown_task_is_invalid_params(wire: Wire) -> None:
    response = wire.post("tasks/get", {"taskId": "nope"}, name="nope")
    assert response.status_code == 400
    assert response.json()["error"] == {"code": -32602, "message": "Task nope not found"}


def test_task_ids_are_unique_and_url_safe(wire: Wire) -> None:
    ids = {wire.start("slow_count", {"n": 0})["taskId"] for _ in range(5)}
    assert len(ids) == 5
    assert all(set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for i in ids)


def test_an_expired_task_is_logged_without_its_id(wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    """A task id is a bearer secret: the expiry line names the task by a short hash only."""
    from tasksapp.demoserver.tasks import task_ref

    caplog.set_level("INFO", logger="tasksapp.demoserver")
    created = wire.start("short_ttl", {"ttl_ms": 200})
    ref = f"ref {task_ref(created['taskId'])}"
    deadline = time.monotonic() + 5
    while not any(ref in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
        time.sleep(0.05)
    assert not any(created["taskId"] in r.getMessage() for r in caplog.records)
