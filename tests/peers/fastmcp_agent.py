"""A third-party agent: fastmcp's own client with fastmcp-tasks' `call_tool_task`, run in .venv-peer.

    .venv-peer/bin/python tests/peers/fastmcp_agent.py URL TOKEN TOOL [ARGUMENTS_JSON]

Starts the tool as a task through URL with `Authorization: Bearer TOKEN`, prints one JSON line
with the task id, waits for the task's end with the handle's own `result()` (which polls
tasks/get), and prints one JSON line with the outcome: the result's texts and isError.
"""

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks.client import call_tool_task


async def main(url: str, token: str, tool: str, arguments: dict[str, Any]) -> None:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    async with Client(transport) as client:
        task = await call_tool_task(client, tool, arguments, raise_on_error=False)
        print(json.dumps({"taskId": task.task_id}), flush=True)
        result = await task.result()
        texts = [getattr(block, "text", None) for block in result.content]
        print(json.dumps({"texts": texts, "isError": result.is_error}), flush=True)


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]) if len(sys.argv) > 4 else {})
    )
