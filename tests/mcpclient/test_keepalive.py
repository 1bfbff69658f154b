"""The keep-alive race at the network edge: a server that closes an idle connection at the instant
the client reuses it. A read (tasks/get, tools/list, server/discover) whose connection closed
before any byte of the answer is sent once more on a new connection; a call or an answer is not
(its outcome is unknown). Idle pooled connections are dropped before the common 5 s cut."""

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tasksapp.mcpclient import McpClient, TransportError
from tasksapp.mcpclient.transport import AiohttpTransport
from tests.mcpclient.hostile_server import DISCOVERY, response, task

pytestmark = pytest.mark.asyncio


class EdgeServer:
    """HTTP/1.1 with keep-alive on a raw socket: each connection answers its first request and then,
    when the next one arrives, closes (cleanly, or with a reset) without a byte of answer, as a
    server whose idle cut fires just as the client writes."""

    def __init__(self, *, reset: bool = False) -> None:
        self.reset = reset
        self.connections = 0
        self.requests: list[tuple[int, str]] = []  # (connection number, JSON-RPC method)
        self.url = ""

    @asynccontextmanager
    async def running(self) -> AsyncIterator["EdgeServer"]:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
        try:
            yield self
        finally:
            server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            served = 0
            while message := await _read_request(reader):
                self.requests.append((number, str(message.get("method"))))
                if served:
                    if self.reset:  # RST instead of FIN
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                writer.write(_answer(message))
                await writer.drain()
                served += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    message: dict[str, Any] = json.loads(await reader.readexactly(length))
    return message


def _answer(message: dict[str, Any]) -> bytes:
    method = message.get("method")
    if method == "server/discover":
        result: Any = DISCOVERY
    elif method == "tools/list":
        result = {"tools": []}
    else:
        result = {"resultType": "complete", **task()}
    body = json.dumps(response(message, result)).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
async def test_a_read_on_a_connection_closed_at_that_instant_is_sent_again_on_a_new_one(reset: bool) -> None:
    async with EdgeServer(reset=reset).running() as edge, McpClient(edge.url) as client:
        await client.discover()  # connection 1 answers, then idles in the pool
        snapshot = await client.get_task("task-7Qx9")  # reused: closed under it; again on connection 2
        assert snapshot.status == "working"
        await client.list_tools()  # connection 2 was the retry's own, closed after it: a new one, 3
        await client.list_tools()  # 3 reused and closed under it; again on connection 4
        assert edge.requests == [
            (1, "server/discover"),
            (1, "tasks/get"),
            (2, "tasks/get"),
            (3, "tools/list"),
            (3, "tools/list"),
            (4, "tools/list"),
        ]


async def test_a_call_or_an_answer_is_never_sent_twice() -> None:
    async with EdgeServer().running() as edge, McpClient(edge.url) as client:
        await client.discover()
        with pytest.raises(TransportError, match="the outcome is unknown"):
            await client.update_task("task-7Qx9", {"k": {"action": "decline"}})
        assert [method for _, method in edge.requests] == ["server/discover", "tasks/update"]


async def test_idle_pooled_connections_are_dropped_before_the_common_five_second_cut() -> None:
    from tasksapp.mcpclient.transport import IDLE_SECONDS

    assert IDLE_SECONDS < 5  # uvicorn's and Node's keep-alive timeout
    async with EdgeServer().running() as edge:
        transport = AiohttpTransport(idle_seconds=0.05)
        async with McpClient(edge.url, transport=transport) as client:
            await client.discover()
            await asyncio.sleep(0.2)  # idle longer than the client keeps connections
            await client.get_task("task-7Qx9")
        assert edge.requests == [(1, "server/discover"), (2, "tasks/get")]  # nothing was lost
