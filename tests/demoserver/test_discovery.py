"""server/discover and tools/list: shapes, pagination, the scenario tools' schemas."""

from __future__ import annotations

from typing import Any

from tasksapp.demoserver.tools import FIXTURE_TOOLS

from . import schemas
from .wire import TASKS, Wire

SCENARIO_TOOLS = [
    "echo",
    "slow_echo",
    "slow_count",
    "ask_form",
    "ask_url",
    "ask_two",
    "ask_sampling",
    "ask_roots",
    "fail_rpc",
    "fail_tool",
    "run_forever",
    "short_ttl",
    "changing_interval",
    "mrtr_then_task",
    "hostile_text",
    "rich_result",
]


def all_tools(wire: Wire) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    while True:
        page = wire.result("tools/list", params)
        schemas.core("ListToolsResult", page)
        assert len(page["tools"]) <= 5
        tools.extend(page["tools"])
        if "nextCursor" not in page:
            return tools
        params = {"cursor": page["nextCursor"]}


def test_discover_advertises_the_tasks_extension(wire: Wire) -> None:
    result = wire.result("server/discover")
    schemas.core("DiscoverResult", result)
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"]["extensions"] == {TASKS: {}}
    assert {"tools", "prompts", "resources", "completions"} <= set(result["capabilities"])
    assert result["instructions"]
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


def test_tools_list_pages_through_every_scenario_tool(wire: Wire) -> None:
    tools = all_tools(wire)
    assert [tool["name"] for tool in tools] == SCENARIO_TOOLS + [tool.name for tool in FIXTURE_TOOLS]
    for tool in tools:
        schemas.core("Tool", tool)
        assert tool["title"] and tool["description"]
        assert tool["inputSchema"]["type"] == "object"
        assert set(tool["inputSchema"].get("required", [])) <= set(tool["inputSchema"]["properties"])


def test_task_tools_take_poll_interval_and_delay(wire: Wire) -> None:
    for tool in all_tools(wire)[: len(SCENARIO_TOOLS)]:
        if tool["name"] not in ("echo", "slow_echo"):
            assert {"poll_interval_ms", "delay"} <= set(tool["inputSchema"]["properties"])


def test_invalid_cursor_is_invalid_params(wire: Wire) -> None:
    first = wire.result("tools/list")
    tampered = first["nextCursor"][:-2] + ("AA" if not first["nextCursor"].endswith("AA") else "BB")
    for cursor in ("nonsense", tampered, 7):
        response = wire.post("tools/list", {"cursor": cursor})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32602


def test_hostile_tool_metadata_is_served_verbatim(wire: Wire) -> None:
    hostile = next(tool for tool in all_tools(wire) if tool["name"] == "hostile_text")
    assert hostile["title"] == '<script>alert("title")</script> Hostile'
    assert "<img src=x onerror=alert(1)>" in hostile["description"]
