"""A TCP proxy at the network edge that can take a server off the network and bring it back.

Faults a real server will not produce on demand; the server behind it stays real.
"""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

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
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

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
