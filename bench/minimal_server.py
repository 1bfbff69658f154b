"""The cheapest MCP endpoint the worker can poll: tasks/get answered from memory, nothing else.

    .venv/bin/python bench/minimal_server.py [--processes 1]

Prints the port on stdout once it accepts connections, then serves until stdin closes. It answers
POST /mcp with `server/discover` (a modern server with the tasks extension) and `tasks/get`
(the asked-for taskId, always the same working task: status "steady", pollIntervalMs 5000, no
TTL). Raw asyncio HTTP/1.1 on uvloop when installed, so that the server, not the worker, is the
fast side of the benchmark. With --processes K the listening socket is shared by K forked
processes (bench/worker.py checks the server's CPU and says when it was the bottleneck).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from email.utils import formatdate
from typing import Any

PATH = b"/mcp"
CREATED_AT = "2026-08-03T09:14:27.512000+00:00"
UPDATED_AT = "2026-08-03T09:15:02.118000+00:00"
STATUS_MESSAGE = "steady"
POLL_INTERVAL_MS = 5000
SERVER_INFO = {"name": "bench-minimal-server", "version": "1"}

# Only the id and the taskId vary, so the answer is a template with two JSON-encoded holes.
_TASK_TEMPLATE = (
    '{"jsonrpc":"2.0","id":%s,"result":{"taskId":%s,"status":"working",'
    f'"statusMessage":"{STATUS_MESSAGE}","createdAt":"{CREATED_AT}","lastUpdatedAt":"{UPDATED_AT}",'
    f'"ttlMs":null,"pollIntervalMs":{POLL_INTERVAL_MS},"resultType":"complete",'
    '"_meta":{"io.modelcontextprotocol/related-task":{"taskId":%s}}}}'
)


def task_answer(request_id: Any, task_id: Any) -> bytes:
    rid, tid = json.dumps(request_id), json.dumps(task_id)
    return (_TASK_TEMPLATE % (rid, tid, tid)).encode()


def discover_answer(request_id: Any) -> bytes:
    result = {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def answer(body: bytes) -> tuple[int, bytes]:
    message = json.loads(body)
    method, request_id = message.get("method"), message.get("id")
    if method == "tasks/get":
        return 200, task_answer(request_id, message["params"]["taskId"])
    if method == "server/discover":
        return 200, discover_answer(request_id)
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return 404, json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 411: b"Length Required"}
_date: tuple[int, bytes] = (0, b"")


def _http_date() -> bytes:
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True).encode())
    return _date[1]


class HttpServer(asyncio.Protocol):
    """Just enough HTTP/1.1: keep-alive, Content-Length bodies, pipelining tolerated."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None  # uvloop's transports do not subclass asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buf[:end]).split(b"\r\n")
            method, target, _ = head[0].split(b" ", 2)
            length, close = 0, False
            for line in head[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection":
                    close = value.strip().lower() == b"close"
                elif name == b"transfer-encoding":
                    self._send(411, b'{"error":"chunked bodies are not supported here"}', True)
                    return
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            if method != b"POST" or target != PATH:
                self._send(404, b"{}", close)
            else:
                try:
                    status, payload = answer(body)
                except (ValueError, KeyError, TypeError, AttributeError):
                    status, payload = 400, b'{"error":"bad request"}'
                self._send(status, payload, close)
            if close:
                return

    def _send(self, status: int, body: bytes, close: bool) -> None:
        head = b"HTTP/1.1 %d %s\r\nServer: bench\r\nDate: %s\r\nContent-Type: application/json\r\n" % (
            status,
            _REASONS[status],
            _http_date(),
        )
        head += b"Content-Length: %d\r\n%s\r\n" % (len(body), b"Connection: close\r\n" if close else b"")
        self.transport.write(head + body)
        if close:
            self.transport.close()


def _serve(sock: socket.socket, announce: bool) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(HttpServer, sock=sock, backlog=4096)
        if announce:
            print(sock.getsockname()[1], flush=True)
        stdin_closed: asyncio.Future[None] = loop.create_future()

        def closed() -> None:
            if not stdin_closed.done():
                stdin_closed.set_result(None)

        loop.add_reader(sys.stdin.fileno(), closed)
        await stdin_closed
        server.close()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=1, help="processes sharing the socket (default 1)")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    children = []
    for _ in range(max(args.processes, 1) - 1):
        pid = os.fork()  # before any event loop exists; every child serves the same socket
        if pid == 0:
            _serve(sock, announce=False)
            os._exit(0)
        children.append(pid)
    try:
        _serve(sock, announce=True)
    finally:
        for pid in children:
            os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
