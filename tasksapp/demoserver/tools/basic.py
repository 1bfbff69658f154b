"""Scenario tools that need no client input: immediate calls, progress, failures, TTLs."""

from __future__ import annotations

import asyncio
import itertools

from ..protocol import ErrorCode, JsonObject
from ..tasks import TaskContext, TaskStart, ToolFailure
from .content import every_content_block
from .registry import Arguments, Tool, task_properties, text_result


async def _echo(arguments: Arguments) -> JsonObject:
    return text_result(arguments["text"], {"text": arguments["text"]})


async def _slow_echo(arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["seconds"])
    return text_result(arguments["text"], {"text": arguments["text"]})


async def _slow_count(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    n = arguments["n"]
    for i in range(1, n + 1):
        await asyncio.sleep(arguments["delay"])
        ctx.say(f"counted {i}/{n}")
    return text_result(f"counted to {n}", {"count": n})


def _slow_count_start(arguments: Arguments, default_interval_ms: int) -> TaskStart:
    interval = arguments.get("poll_interval_ms", default_interval_ms)
    return TaskStart(f"counted 0/{arguments['n']}", interval)


async def _fail_rpc(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    raise ToolFailure(ErrorCode.INTERNAL_ERROR.value, "Simulated backend failure", {"retryAfterS": 30})


async def _fail_tool(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    ctx.say("The tool reported an error.")
    return text_result(
        "fail_tool: deliberate tool-level failure (the upstream service refused the request)",
        is_error=True,
    )


async def _run_forever(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    for tick in itertools.count(1):
        await asyncio.sleep(arguments["delay"])
        ctx.say(f"tick {tick}")
    raise AssertionError("unreachable")


async def _short_ttl(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.Event().wait()  # stays working until it expires or is cancelled
    raise AssertionError("unreachable")


def _short_ttl_start(arguments: Arguments, default_interval_ms: int) -> TaskStart:
    ttl_ms = arguments["ttl_ms"]
    interval = arguments.get("poll_interval_ms", default_interval_ms)
    return TaskStart(f"Working; this task expires {ttl_ms} ms after creation.", interval, ttl_ms)


_INTERVAL_STEPS = (800, 400)


async def _changing_interval(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    for interval in _INTERVAL_STEPS:
        await asyncio.sleep(arguments["delay"])
        ctx.set_poll_interval(interval, f"poll interval now {interval} ms")
    await asyncio.sleep(arguments["delay"])
    return text_result("poll interval changed twice", {"intervals": list(_INTERVAL_STEPS)})


def _changing_interval_start(arguments: Arguments, default_interval_ms: int) -> TaskStart:
    interval = arguments.get("poll_interval_ms", 200)
    return TaskStart(f"poll interval now {interval} ms", interval)


async def _rich_result(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    return {
        "content": every_content_block(),
        "structuredContent": {"answer": 42, "tags": ["demo", "rich"], "nested": {"ok": True}},
        "isError": False,
    }


_DELAY_TEXT = "Seconds to wait before finishing."

BASIC_TOOLS: tuple[Tool, ...] = (
    Tool(
        name="echo",
        title="Echo",
        description="Immediately returns the text it was given. Never creates a task.",
        # Optional, so the first tool listed can be called with no arguments (conformance probes do).
        properties={"text": {"type": "string", "default": "echo", "description": "Text to echo back."}},
        immediate=_echo,
        annotations={"readOnlyHint": True},
    ),
    Tool(
        name="slow_echo",
        title="Slow Echo",
        description=(
            "Returns the text after `seconds`, without a task. Calls longer than 0.3 s "
            "are answered as an SSE stream."
        ),
        properties={
            "text": {"type": "string", "default": "slow echo", "description": "Text to echo."},
            "seconds": {"type": "number", "minimum": 0, "maximum": 60, "default": 0.5},
        },
        immediate=_slow_echo,
        annotations={"readOnlyHint": True},
    ),
    Tool(
        name="slow_count",
        title="Slow Count",
        description="A task that counts to n, updating statusMessage at every step.",
        properties={
            "n": {"type": "integer", "minimum": 0, "maximum": 10000, "default": 5},
            **task_properties(0.5, "Seconds between two counts."),
        },
        task=_slow_count,
        start=_slow_count_start,
    ),
    Tool(
        name="fail_rpc",
        title="Fail (JSON-RPC error)",
        description="A task that ends `failed` with a -32603 error carrying retryAfterS.",
        properties=task_properties(0.3, _DELAY_TEXT),
        task=_fail_rpc,
    ),
    Tool(
        name="fail_tool",
        title="Fail (tool error)",
        description="A task that ends `completed` with a result whose isError is true.",
        properties=task_properties(0.3, _DELAY_TEXT),
        task=_fail_tool,
    ),
    Tool(
        name="run_forever",
        title="Run Forever",
        description="A task that stays working, ticking its statusMessage, until cancelled.",
        properties=task_properties(1.0, "Seconds between two ticks."),
        task=_run_forever,
        start=lambda arguments, interval: TaskStart("tick 0", arguments.get("poll_interval_ms", interval)),
    ),
    Tool(
        name="short_ttl",
        title="Short TTL",
        description="A task with a short ttlMs that stays working and is deleted when it expires.",
        properties={
            "ttl_ms": {"type": "integer", "minimum": 1, "default": 2000},
            **task_properties(0.3, "Unused; accepted for uniformity."),
        },
        task=_short_ttl,
        start=_short_ttl_start,
    ),
    Tool(
        name="changing_interval",
        title="Changing Poll Interval",
        description="A task whose pollIntervalMs moves 200 → 800 → 400 before it completes.",
        properties=task_properties(0.3, "Seconds between two interval changes."),
        task=_changing_interval,
        start=_changing_interval_start,
    ),
    Tool(
        name="rich_result",
        title="Rich Result",
        description="A task completing with text, image, audio, resource_link, embedded resource "
        "and structuredContent.",
        properties=task_properties(0.3, _DELAY_TEXT),
        task=_rich_result,
    ),
)
