"""Small async helpers for driving a real server through McpClient in tests."""

import asyncio

from tasksapp.mcpclient import DetailedTask, McpClient


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
