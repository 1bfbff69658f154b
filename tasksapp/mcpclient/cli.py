"""`python -m tasksapp.mcpclient URL VERB ...`: the client for people and scripts.

Prints JSON: one object per result, one line per observed change under --follow and listen.
Exit codes: 0 done, 1 transport error (or a legacy server asked for what it cannot do), 2 JSON-RPC
error, bad usage, or a listen whose acknowledgement accepts none of the ids, 3 task waiting for input.
"""

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from tasksapp.mcpclient.client import McpClient
from tasksapp.mcpclient.errors import ListenUnsupported, McpError, ProtocolError
from tasksapp.mcpclient.types import (
    DetailedTask,
    InputRequired,
    InputRequiredTask,
    ListenAck,
    ListenEnded,
    TaskCreated,
    ToolResult,
)
from tasksapp.mcpclient.wire import InputKinds, parse_header_lines, parse_json_object

EXIT_OK, EXIT_TRANSPORT, EXIT_RPC, EXIT_INPUT = 0, 1, 2, 3
DEFAULT_POLL_MS = 1000
MIN_POLL_MS = 50


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(_ids_are_not_options(list(sys.argv[1:] if argv is None else argv)))
    try:
        headers = parse_header_lines(args.header)
        json_args = [
            parse_json_object(text, name.upper()) if (text := getattr(args, name, None)) is not None else None
            for name in ("arguments", "responses")
        ]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_RPC
    try:
        return asyncio.run(_run(args, headers, json_args[0], json_args[1]))
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace, headers: dict[str, str], arguments: Any, responses: Any) -> int:
    kinds = InputKinds(elicitation_form=True, elicitation_url=True, sampling=args.sampling, roots=args.roots)
    try:
        async with McpClient(args.url, token=args.token, headers=headers, input_kinds=kinds) as client:
            return await _verb(client, args, arguments, responses)
    except ProtocolError as exc:
        _fail(exc.to_json())
        return EXIT_RPC
    except (McpError, ValueError) as exc:
        _fail({"message": str(exc), "type": type(exc).__name__})
        return EXIT_TRANSPORT


async def _verb(client: McpClient, args: argparse.Namespace, arguments: Any, responses: Any) -> int:
    verb = args.verb
    if verb == "discover":
        found = await client.discover()
        _emit({"era": found.era, "tasksSupported": found.tasks_supported, **found.raw})
    elif verb == "tools":
        _emit({"tools": [tool.raw for tool in await client.list_tools()]})
    elif verb == "call":
        return await _call(client, args, arguments)
    elif verb == "get":
        task = await client.get_task(args.task_id)
        _emit(task.raw)
        return _exit_for(task)
    elif verb == "update":
        await client.update_task(args.task_id, responses)
        _emit({"resultType": "complete"})
    elif verb == "cancel":
        await client.cancel_task(args.task_id)
        _emit({"resultType": "complete"})
    elif verb == "listen":
        return await _listen(client, args.task_ids)
    return EXIT_OK


async def _call(client: McpClient, args: argparse.Namespace, arguments: Any) -> int:
    outcome = await client.call_tool(args.tool, arguments)
    if isinstance(outcome, ToolResult):
        _emit({"outcome": "result", **outcome.raw})
        return EXIT_OK
    if isinstance(outcome, InputRequired):
        _emit({"outcome": "input_required", **outcome.raw})
        return EXIT_INPUT
    assert isinstance(outcome, TaskCreated)
    _emit({"outcome": "task", **outcome.raw})
    if not args.follow:
        return EXIT_OK
    return await _follow(client, outcome.task)


async def _follow(client: McpClient, task: DetailedTask) -> int:
    """Poll tasks/get at the server's pollIntervalMs, printing each change, until terminal or input."""
    seen = _fingerprint(task)
    while not task.is_terminal and not isinstance(task, InputRequiredTask):
        interval = task.poll_interval_ms if task.poll_interval_ms is not None else DEFAULT_POLL_MS
        await asyncio.sleep(max(interval, MIN_POLL_MS) / 1000)
        task = await client.get_task(task.task_id)
        if (current := _fingerprint(task)) != seen:
            seen = current
            _emit(task.raw)
    return _exit_for(task)


async def _listen(client: McpClient, task_ids: list[str]) -> int:
    try:
        async for event in client.listen(task_ids):
            if isinstance(event, ListenAck):
                _emit(
                    {
                        "event": "acknowledged",
                        "subscriptionId": event.subscription_id,
                        "taskIds": event.task_ids,
                    }
                )
                if refused := [task_id for task_id in task_ids if task_id not in event.task_ids]:
                    _refused(refused, any_left=bool(event.task_ids))
                if not event.task_ids:
                    return EXIT_RPC
            elif isinstance(event, ListenEnded):
                _emit({"event": "ended", "subscriptionId": event.subscription_id})
            else:
                _emit({"event": "task", **event.raw})
    except ListenUnsupported as exc:
        _fail({"message": str(exc), "type": "ListenUnsupported"})
        return EXIT_TRANSPORT
    return EXIT_OK


def _refused(task_ids: list[str], *, any_left: bool) -> None:
    """The ack honours only some ids (§7.2): say which, and stop when nothing is left to wait for."""
    what = "will not push" if any_left else "accepted none of the ids, so there is nothing to listen for"
    message = (
        f"the server {what}: {', '.join(task_ids)} (unknown, expired or finished, or it does not "
        "push tasks); poll them with `get` instead"
    )
    _fail({"message": message, "type": "NotAcknowledged", "taskIds": task_ids})


ID_VERBS = {"get", "update", "cancel", "listen"}
VALUED_OPTIONS = {"--header", "--token"}


def _ids_are_not_options(argv: list[str]) -> list[str]:
    """Task ids are opaque and may start with '-' (fastmcp's use the URL-safe Base64 alphabet):
    after a verb that takes only ids and JSON, end option parsing so argparse reads them as values."""
    positionals, index = 0, 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return argv
        if word in VALUED_OPTIONS:
            index += 2
            continue
        if not word.startswith("-"):
            positionals += 1
            if positionals == 2 and word in ID_VERBS:
                rest = argv[index + 1 :]
                if rest[:1] in (["-h"], ["--help"], ["--"]):  # help, or options already ended by hand
                    return argv
                return [*argv[: index + 1], "--", *rest]
        index += 1
    return argv


def _fingerprint(task: DetailedTask) -> tuple[Any, ...]:
    keys = tuple(sorted(task.input_requests)) if isinstance(task, InputRequiredTask) else ()
    return (task.status, task.status_message, task.poll_interval_ms, keys)


def _exit_for(task: DetailedTask) -> int:
    return EXIT_INPUT if isinstance(task, InputRequiredTask) else EXIT_OK


def _emit(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False, separators=(",", ":")), flush=True)


def _fail(error: dict[str, Any]) -> None:
    print(json.dumps({"error": error}, ensure_ascii=False), file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasksapp.mcpclient", description=__doc__)
    parser.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    parser.add_argument("--header", action="append", default=[], help="extra header 'Name: value'")
    parser.add_argument("--token", help="send Authorization: Bearer TOKEN")
    parser.add_argument("--sampling", action="store_true", help="declare the sampling capability")
    parser.add_argument("--roots", action="store_true", help="declare the roots capability")
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("discover", help="server/discover (falls back to initialize on legacy servers)")
    verbs.add_parser("tools", help="tools/list, all pages")
    call = verbs.add_parser("call", help="tools/call")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", help="ARGS_JSON, a JSON object")
    call.add_argument("--follow", action="store_true", help="poll the task until it ends or needs input")
    for verb in ("get", "cancel"):
        verbs.add_parser(verb, help=f"tasks/{verb}").add_argument("task_id")
    update = verbs.add_parser("update", help="tasks/update")
    update.add_argument("task_id")
    update.add_argument("responses", help="INPUT_RESPONSES_JSON, {key: response}")
    verbs.add_parser("listen", help="subscriptions/listen for task pushes").add_argument(
        "task_ids", nargs="+"
    )
    return parser
