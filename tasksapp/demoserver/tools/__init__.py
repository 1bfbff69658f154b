"""The scenario tools, in the order `tools/list` serves them: the demo's own, then the fixtures
the official conformance suite calls (docs/conformance.md)."""

from __future__ import annotations

from .asking import ASKING_TOOLS
from .basic import BASIC_TOOLS
from .conformance_content import CONTENT_TOOLS
from .conformance_mrtr import MRTR_FIXTURES
from .conformance_tasks import TASK_FIXTURES
from .mrtr import MRTR_TOOL
from .registry import Tool

_ORDER = (
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
)
_BY_NAME = {tool.name: tool for tool in (*BASIC_TOOLS, *ASKING_TOOLS, MRTR_TOOL)}

DEMO_TOOLS: tuple[Tool, ...] = tuple(_BY_NAME[name] for name in _ORDER)
FIXTURE_TOOLS: tuple[Tool, ...] = (*CONTENT_TOOLS, *MRTR_FIXTURES, *TASK_FIXTURES)
TOOLS: tuple[Tool, ...] = (*DEMO_TOOLS, *FIXTURE_TOOLS)
TOOLS_BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}
assert len(TOOLS_BY_NAME) == len(TOOLS), "tool names must be unique"

__all__ = ["DEMO_TOOLS", "FIXTURE_TOOLS", "TOOLS", "TOOLS_BY_NAME", "Tool"]
