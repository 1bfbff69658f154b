"""Small helpers for driving a real server from tests: through McpClient (async), or through the
command line (`python -m tasksapp.mcpclient`, JSON lines out)."""

import asyncio
import json
import subprocess
import sys
from typing import Any

from tasksapp.mcpclient import DetailedTask, McpClient
from tests.peers.launch import ROOT


async def wait_for_status(
    client: McpClient, task_id: str, *statuses: str, timeout: float = 15.0
) -> tuple[DetailedTask, list[DetailedTask]]:
    """Poll tasks/get at the server's interval until the task reaches one of `statuses`.

    Returns the final snapshot and every snapshot seen on the way.
    """
    seen: list[DetailedTask] = []
    async with asyncio.timeout(timeout):
        while True:
            task = await client.get_task(task_id)
            seen.append(task)
            if task.status in statuses:
                return task, seen
            await asyncio.sleep((task.poll_interval_ms or 200) / 1000)


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tasksapp.mcpclient", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]
