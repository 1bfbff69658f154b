"""The scenario tools, in the order `tools/list` pages through them."""

from __future__ import annotations

from .asking import ASKING_TOOLS
from .basic import BASIC_TOOLS
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

TOOLS: tuple[Tool, ...] = tuple(_BY_NAME[name] for name in _ORDER)
TOOLS_BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}

__all__ = ["TOOLS", "TOOLS_BY_NAME", "Tool"]
