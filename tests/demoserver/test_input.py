"""Tasks that wait for tasks/update, and MRTR before a task exists."""

from __future__ import annotations

from typing import Any

import pytest

from tasksapp.demoserver import run_in_thread

from . import schemas
from .wire import TERMINAL, Wire


def waiting(wire: Wire, tool: str, **arguments: Any) -> dict[str, Any]:
    created = wire.start(tool, {"delay": 0, **arguments})
    task = wire.wait_for(created["taskId"], "input_required")
    schemas.tasks("GetTaskResult", task)
    return task


def test_ask_form_uses_every_field_type(wire: Wire) -> None:
    task = waiting(wire, "ask_form")
    [request] = task["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "form"
    props = params["requestedSchema"]["properties"]
    formats = {p.get("format") for p in props.values()}
    assert {"email", "uri", "date", "date-time"} <= formats
    types = {p.get("type") for p in props.values()}
    assert {"string", "number", "integer", "boolean", "array"} <= types
    assert any("oneOf" in p for p in props.values())
    assert any("enumNames" in p for p in props.values())
    assert any(p.get("type") == "array" and "enum" in p["items"] for p in props.values())
    assert any(p.get("type") == "array" and "anyOf" in p["items"] for p in props.values())
    assert any("minLength" in p and "maxLength" in p for p in props.values())
    assert any("minItems" in p and "maxItems" in p for p in props.values())
    assert params["requestedSchema"]["required"]


def test_ask_form_accept_completes_with_the_answers(wire: Wire) -> None:
    task = waiting(wire, "ask_form")
    [key] = task["inputRequests"]
    answers = {"name": "Ada", "email": "ada@example.com", "plan": "pro", "tags": ["alpha"]}
    ack = wire.update(task["taskId"], {key: {"action": "accept", "content": answers}})
    assert ack["resultType"] == "complete"
    done = wire.wait_for(task["taskId"], *TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"answers": answers}
    assert "inputRequests" not in done


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_ask_form_refusal_completes_saying_so(wire: Wire, action: str) -> None:
    task = waiting(wire, "ask_form")
    [key] = task["inputRequests"]
    wire.update(task["taskId"], {key: {"action": action}})
    done = wire.wait_for(task["taskId"], *TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["isError"] is False
    assert ("declined" if action == "decline" else "cancelled") in done["result"]["content"][0]["text"]


def test_ask_url_accept_goes_back_to_working_then_completes(wire: Wire) -> None:
    task = waiting(wire, "ask_url", delay=0.2)
    [(key, request)] = task["inputRequests"].items()
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"].startswith("https://example.com/connect?state=")
    assert request["params"]["message"]
    wire.update(task["taskId"], {key: {"action": "accept"}})
    assert wire.get(task["taskId"])["status"] == "working"
    assert wire.wait_for(task["taskId"], *TERMINAL)["status"] == "completed"


def test_ask_two_resumes_only_when_both_are_answered(wire: Wire) -> None:
    task = waiting(wire, "ask_two")
    first, second = sorted(task["inputRequests"])
    assert first != second
    wire.update(task["taskId"], {first: {"action": "accept", "content": {"x": 1}}})
    partial = wire.get(task["taskId"])
    assert partial["status"] == "input_required"
    assert list(partial["inputRequests"]) == [second]
    assert partial["lastUpdatedAt"] > task["lastUpdatedAt"]
    wire.update(task["taskId"], {first: {"action": "decline"}})  # answered already: ignored
    assert wire.get(task["taskId"])["lastUpdatedAt"] == partial["lastUpdatedAt"]
    wire.update(task["taskId"], {second: {"action": "accept", "content": {"count": 2}}})
    done = wire.wait_for(task["taskId"], *TERMINAL)
    assert done["status"] == "completed"
    answers = done["result"]["structuredContent"]
    assert {answers["first"]["action"], answers["second"]["action"]} == {"accept"}


def test_unknown_keys_and_tasks_are_handled_as_the_spec_says(wire: Wire) -> None:
    task = waiting(wire, "ask_form")
    assert wire.update(task["taskId"], {"not-a-key": {"action": "accept"}})["resultType"] == "complete"
    assert wire.get(task["taskId"])["lastUpdatedAt"] == task["lastUpdatedAt"]
    response = wire.post("tasks/update", {"taskId": "gone", "inputResponses": {}}, name="gone")
    assert response.json()["error"]["code"] == -32602


def test_ask_sampling_completes_with_the_reply(wire: Wire) -> None:
    task = waiting(wire, "ask_sampling")
    [(key, request)] = task["inputRequests"].items()
    assert request["method"] == "sampling/createMessage"
    params = request["params"]
    assert {"messages", "systemPrompt", "modelPreferences", "maxTokens"} <= set(params)
    reply = {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "test-model",
        "stopReason": "endTurn",
    }
    wire.update(task["taskId"], {key: reply})
    done = wire.wait_for(task["taskId"], *TERMINAL)
    assert "Paris" in done["result"]["content"][0]["text"]


def test_ask_roots_lists_the_roots_it_received(wire: Wire) -> None:
    task = waiting(wire, "ask_roots")
    [(key, request)] = task["inputRequests"].items()
    assert request == {"method": "roots/list"}
    roots = {"roots": [{"uri": "file:///srv/a", "name": "a"}, {"uri": "file:///srv/b"}]}
    wire.update(task["taskId"], {key: roots})
    done = wire.wait_for(task["taskId"], *TERMINAL)
    assert done["result"]["structuredContent"] == {"roots": ["file:///srv/a", "file:///srv/b"]}
    assert "file:///srv/b" in done["result"]["content"][0]["text"]


def test_input_keys_are_never_reused(wire: Wire) -> None:
    keys: set[str] = set()
    for _ in range(3):
        keys.update(waiting(wire, "ask_two")["inputRequests"])
    assert len(keys) == 6


def test_cancel_while_waiting_for_input(wire: Wire) -> None:
    task = waiting(wire, "ask_form")
    wire.cancel(task["taskId"])
    done = wire.wait_for(task["taskId"], *TERMINAL, timeout=1)
    assert done["status"] == "cancelled"
    assert "inputRequests" not in done


def test_hostile_text_serves_markup_verbatim(wire: Wire) -> None:
    created = wire.start("hostile_text", {"delay": 0.1})
    assert created["statusMessage"] == '<script>alert("status")</script>'
    task = wire.wait_for(created["taskId"], "input_required")
    [(key, request)] = task["inputRequests"].items()
    assert "<script>" in request["params"]["message"]
    assert "javascript:alert(1)" in request["params"]["message"]
    wire.update(task["taskId"], {key: {"action": "accept", "content": {"answer": "x"}}})
    done = wire.wait_for(task["taskId"], *TERMINAL)
    content = done["result"]["content"]
    assert {"type": "text", "text": '<script>alert("result")</script>'} in content
    assert any(b["type"] == "resource_link" and b["uri"] == "javascript:alert(1)" for b in content)


def mrtr_call(wire: Wire, **params: Any) -> tuple[int, dict[str, Any]]:
    body = {"name": "mrtr_then_task", "arguments": {"delay": 0}, **params}
    response = wire.post("tools/call", body, name="mrtr_then_task")
    return response.status_code, response.json()


def test_mrtr_then_task_asks_first_then_creates_a_task(wire: Wire) -> None:
    _, first = mrtr_call(wire)
    asked = first["result"]
    assert asked["resultType"] == "input_required"
    [(key, request)] = asked["inputRequests"].items()
    assert request["params"]["requestedSchema"]["required"] == ["name"]
    assert asked["requestState"].startswith("v1.")
    _, again = mrtr_call(wire, requestState=asked["requestState"])
    assert again["result"]["resultType"] == "input_required"
    answer = {key: {"action": "accept", "content": {"name": "Grace"}}}
    _, retried = mrtr_call(wire, inputResponses=answer, requestState=asked["requestState"])
    created = retried["result"]
    assert created["resultType"] == "task"
    done = wire.wait_for(created["taskId"], *TERMINAL)
    assert done["result"]["content"][0]["text"] == "Hello, Grace!"


def test_mrtr_rejects_a_tampered_request_state(wire: Wire) -> None:
    _, first = mrtr_call(wire)
    state = first["result"]["requestState"]
    [key] = first["result"]["inputRequests"]
    version, payload, signature = state.split(".")
    forged = f"{version}.{payload}x.{signature}"
    answer = {key: {"action": "accept", "content": {"name": "Mallory"}}}
    status, reply = mrtr_call(wire, inputResponses=answer, requestState=forged)
    assert status == 400
    assert reply["error"] == {
        "code": -32602,
        "message": "Invalid or expired requestState",
        "data": {"reason": "invalid_request_state"},
    }


def test_mrtr_then_task_needs_the_tasks_capability(wire: Wire) -> None:
    params = {"name": "mrtr_then_task", "arguments": {}}
    response = wire.post("tools/call", params, name="mrtr_then_task", tasks=False)
    assert response.json()["error"]["code"] == -32021


def test_mrtr_decline_gets_an_immediate_result(wire: Wire) -> None:
    _, first = mrtr_call(wire)
    [key] = first["result"]["inputRequests"]
    answer = {key: {"action": "decline"}}
    _, reply = mrtr_call(wire, inputResponses=answer, requestState=first["result"]["requestState"])
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["isError"] is False


# --- input kinds the client did not declare (PROTOCOL.md §2.1, §6) ---------------------------


def test_an_mrtr_question_of_a_kind_not_declared_is_refused_with_32021(wire: Wire) -> None:
    response = wire.post(
        "tools/call", {"name": "mrtr_then_task", "arguments": {}}, name="mrtr_then_task", declared={}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021 and "'elicitation.form'" in error["message"]
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    asked = wire.call("mrtr_then_task", {}, declared={"elicitation": {}})  # {} alone: form mode
    assert asked["resultType"] == "input_required"


@pytest.mark.parametrize(
    ("tool", "declared", "missing"),
    [
        ("ask_form", {}, {"elicitation": {"form": {}}}),
        ("ask_form", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("ask_url", {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("ask_sampling", {"elicitation": {}}, {"sampling": {}}),
        ("ask_roots", {"sampling": {}}, {"roots": {}}),
    ],
)
def test_a_task_never_sends_a_kind_its_request_did_not_declare(
    wire: Wire, tool: str, declared: dict[str, Any], missing: dict[str, Any]
) -> None:
    created = wire.call(tool, {"delay": 0}, declared=declared)
    done = wire.wait_for(created["taskId"], *TERMINAL)
    assert done["status"] == "failed" and "inputRequests" not in done
    assert done["error"]["code"] == -32021
    assert done["error"]["data"] == {"requiredCapabilities": missing}


def test_a_permissive_server_sends_them_anyway() -> None:
    server = run_in_thread(permissive_inputs=True, poll_interval_ms=100)
    client = Wire(server.url)
    try:
        assert client.call("mrtr_then_task", {}, declared={})["resultType"] == "input_required"
        created = client.call("ask_roots", {"delay": 0}, declared={})
        assert client.wait_for(created["taskId"], "input_required")["status"] == "input_required"
    finally:
        client.close()
        server.stop()
