"""`--state-file`: the reference server keeps its tasks across a restart, as `manage.py demo` runs it."""

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasksapp.mcpclient import CompletedTask, McpClient, ProtocolError, TaskCreated
from tests.mcpclient.helpers import wait_for_status
from tests.peers.launch import RunningPeer, demoserver_argv, free_port, start_peer

READY = "demoserver listening on"


class Restartable:
    def __init__(self, state: Path) -> None:
        self.port = free_port()
        self.argv = demoserver_argv("--poll-interval-ms", "100", "--state-file", str(state))
        self.peer: RunningPeer | None = None

    def start(self) -> str:
        self.peer = start_peer("persisting-demo", self.argv, READY, self.port)
        return self.peer.url

    def stop(self) -> None:
        if self.peer is not None:
            self.peer.stop()
            assert self.peer.process.returncode == 0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Restartable]:
    restartable = Restartable(tmp_path / "tasks.json")
    try:
        yield restartable
    finally:
        restartable.stop()


async def started(client: McpClient, tool: str, **arguments: object) -> str:
    outcome = await client.call_tool(tool, dict(arguments), input_schema={"type": "object"})
    assert isinstance(outcome, TaskCreated), outcome
    return outcome.task.task_id


async def test_a_restarted_server_still_knows_its_tasks(server: Restartable, tmp_path: Path) -> None:
    url = server.start()
    async with McpClient(url) as client:
        done = await started(client, "slow_count", n=1, delay=0.05)
        finished, _ = await wait_for_status(client, done, "completed")
        running = await started(client, "run_forever", delay=30)
        before = await client.get_task(running)
    server.stop()
    state = tmp_path / "tasks.json"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600  # task ids are bearer secrets
    assert {task["task_id"] for task in json.loads(state.read_text())["tasks"]} == {done, running}

    url = server.start()
    async with McpClient(url) as client:
        kept = await client.get_task(done)
        resumed = await client.get_task(running)
        with pytest.raises(ProtocolError) as unknown:
            await client.get_task("never-created")
    assert isinstance(kept, CompletedTask) and kept.raw["result"] == finished.raw["result"]
    assert resumed.status == "working"  # not cancelled by the shutdown, not forgotten
    assert (resumed.created_at, resumed.ttl_ms) == (before.created_at, before.ttl_ms)
    assert unknown.value.is_not_found


def test_an_unreadable_task_file_is_set_aside_and_the_server_starts_empty(
    server: Restartable, tmp_path: Path
) -> None:
    (tmp_path / "tasks.json").write_text('{"format": 1, "tasks": [{"task_id": "x"}]')  # cut short
    server.start()
    assert (tmp_path / "tasks.json.unreadable").exists()
