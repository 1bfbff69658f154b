"""Fakes at the network edge, for faults a real server will not produce on demand: a TCP proxy that
takes a server off the network and brings it back (the server behind it stays real), and a
scripted server for answers no real server gives.
"""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.peers.launch import free_port


class OutageProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self.up()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(5)

    def down(self) -> None:
        """Refuse new connections and cut the open ones, as when a server dies."""
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(5)

    def close(self) -> None:
        self.down()
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port, reuse_address=True)

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Cut open connections before waiting: wait_closed() waits for them (a listen stream never ends).
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if server is not None:
            await server.wait_closed()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort() if dst.transport else None

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._writers.difference_update((writer, up_writer))


@contextmanager
def outage_proxy(target_url: str) -> Iterator[OutageProxy]:
    port = int(target_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = OutageProxy(port)
    try:
        yield proxy
    finally:
        proxy.close()


class ScriptedServer:
    """tests/mcpclient/hostile_server.HostileServer on a thread of its own, for synchronous tests:
    a server that misbehaves exactly as the script says (drips keep-alives, reuses task ids...)."""

    def __init__(self, script: Any, *, answer_discover: bool = True) -> None:
        from tests.mcpclient.hostile_server import HostileServer

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server = HostileServer(script, answer_discover=answer_discover)
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self._loop).result(10)
        self.url = self.server.url

    def methods(self) -> list[str]:
        return [str(message.get("method")) for message in list(self.server.messages)]

    def count(self, method: str) -> int:
        return self.methods().count(method)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.__aexit__(None, None, None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@contextmanager
def scripted_server(script: Any) -> Iterator[ScriptedServer]:
    server = ScriptedServer(script)
    try:
        yield server
    finally:
        server.close()
