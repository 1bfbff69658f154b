"""The official TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0, revision 2026-07-28, no
tasks) in its default response mode: a slow plain tool stays silent, then answers in plain JSON."""

from typing import Any

import pytest

from tasksapp.models import McpServer
from tests.interop.helpers import manage
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.interop


@pytest.fixture
def ts2(transactional_db: None, ts2_server: RunningPeer) -> Any:
    return manage("servers", "add", "ts2", ts2_server.url)


def test_discovery_and_a_quick_call(ts2: dict[str, Any]) -> None:
    assert (ts2["era"], ts2["tasksSupported"]) == ("modern", False)
    done = manage("call", "ts2", "echo", '{"text": "hello"}')
    assert done == {"outcome": "result", "result": done["result"]}
    assert done["result"]["content"] == [{"type": "text", "text": "hello"}]


def test_a_plain_tool_silent_past_the_read_timeout_succeeds(ts2: dict[str, Any]) -> None:
    """The read timeout (30 s by default, 2 s here) never bounds a tools/call answer;
    only the call timeout does. The server stays silent for 2.5 times the read timeout."""
    McpServer.objects.filter(name="ts2").update(read_timeout_seconds=2)
    done = manage("call", "ts2", "slow_answer", '{"seconds": 5}')
    assert done["outcome"] == "result", done
    assert done["result"]["content"][0]["text"] == "answered after 5 s"
