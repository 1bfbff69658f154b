"""The official Python SDK's own server (``mcp==2.3.0``, revision 2026-07-28, no tasks), for tests.

Run with the peer venv (where ``mcp==2.3.0`` is pinned beside fastmcp):

    .venv-peer/bin/python tests/peers/sdk_server.py --host 127.0.0.1 --port PORT

Prints ``sdk peer listening on http://HOST:PORT/mcp`` once uvicorn accepts connections; SIGTERM
stops it cleanly. Its tools ask for input before they run (MRTR, PROTOCOL.md §4) by returning
the SDK's ``InputRequiredResult``:

* ``book_table(party=2)`` asks one question (which day); accept books it, decline does not.
* ``plan_trip()`` asks two questions at once (where, how many nights); both must be accepted.
* ``echo(text)`` answers at once.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult


def _question(message: str, field: str, kind: str) -> ElicitRequest:
    schema: dict[str, Any] = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _answers(ctx: Context, keys: list[str]) -> dict[str, Any] | None:
    """The ElicitResults for every key, or None when any is missing (then ask again)."""
    given = ctx.input_responses or {}
    answers = {key: given.get(key) for key in keys}
    return answers if all(answer is not None for answer in answers.values()) else None


def build() -> MCPServer:
    mcp = MCPServer("sdk-peer", instructions="The official Python SDK server, for the dashboard's tests.")

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def book_table(ctx: Context, party: int = 2) -> str | InputRequiredResult:
        """Book a table; asks which day first."""
        answers = _answers(ctx, ["day"])
        if answers is None:
            return InputRequiredResult(input_requests={"day": _question("Which day?", "day", "string")})
        day = answers["day"]
        if day.action != "accept" or not day.content:
            return f"Nothing booked: you chose {day.action}."
        return f"Booked a table for {party} on {day.content['day']}."

    @mcp.tool()
    def plan_trip(ctx: Context) -> str | InputRequiredResult:
        """Plan a trip; asks where and for how many nights, both at once."""
        answers = _answers(ctx, ["where", "nights"])
        if answers is None:
            requests = {
                "where": _question("Where to?", "city", "string"),
                "nights": _question("How many nights?", "nights", "integer"),
            }
            return InputRequiredResult(input_requests=requests, request_state="trip-v1")
        refused = [key for key, answer in answers.items() if answer.action != "accept"]
        if refused:
            return f"No trip planned: you declined {', '.join(sorted(refused))}."
        where, nights = answers["where"].content["city"], answers["nights"].content["nights"]
        return f"Planned {nights} nights in {where} (state {ctx.request_state})."

    return mcp


async def serve(host: str, port: int) -> None:
    app = build().streamable_http_app(streamable_http_path="/mcp", host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving
            raise SystemExit(1)
        await asyncio.sleep(0.01)
    print(f"sdk peer listening on http://{host}:{port}/mcp", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
