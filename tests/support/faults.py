"""Fakes at the network edge, for faults a real server will not produce on demand: a TCP proxy that
takes a server off the network and brings it back (the server behind it stays real), and a
scripted server for answers no real server gives.
"""

import asyncio
import re
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


class PartitionProxy(OutageProxy):
    """An OutageProxy that can also cut off one client (a worker, told apart by the User-Agent of
    the first request on each connection: `worker/<name>`) while the others still get through:
    a network partition between that worker and the server. Its open connections are cut, and its
    new ones closed once their first request's headers have arrived."""

    def __init__(self, target_port: int) -> None:
        self.cut_off: set[str] = set()
        self._clients: dict[asyncio.StreamWriter, str] = {}
        super().__init__(target_port)

    def partition(self, *workers: str) -> None:
        """Cut these workers off (and only them); with none, heal every partition."""
        asyncio.run_coroutine_threadsafe(self._partition(set(workers)), self._loop).result(5)

    async def _partition(self, workers: set[str]) -> None:
        self.cut_off = workers
        for writer, worker in list(self._clients.items()):
            if worker in workers:
                writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)  # cut by down() even before its first request has arrived
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.transport.abort()
            return
        agent = re.search(rb"(?im)^user-agent:.*?worker/(\S+)", head)
        worker = agent.group(1).decode() if agent else ""
        if worker in self.cut_off:
            writer.transport.abort()
            return
        self._clients[writer] = worker
        try:
            await super()._pipe(_Replay(head, reader), writer)  # type: ignore[arg-type]
        finally:
            self._clients.pop(writer, None)


class StallProxy(OutageProxy):
    """An OutageProxy that can also stall: connections are accepted and kept, but no byte moves
    either way until `resume()`, as when a server (Redis) hangs or a network path black-holes."""

    def __init__(self, target_port: int) -> None:
        self._flowing: asyncio.Event | None = None
        super().__init__(target_port)
        self._flowing = asyncio.run_coroutine_threadsafe(self._event(), self._loop).result(5)

    async def _event(self) -> asyncio.Event:
        event = asyncio.Event()
        event.set()
        return event

    def stall(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

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
                    if self._flowing is not None:
                        await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort() if dst.transport else None

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._writers.difference_update((writer, up_writer))


class _Replay:
    """A StreamReader that yields the bytes already read first."""

    def __init__(self, head: bytes, reader: asyncio.StreamReader) -> None:
        self.head, self.reader = head, reader

    async def read(self, n: int) -> bytes:
        if self.head:
            data, self.head = self.head, b""
            return data
        return await self.reader.read(n)


@contextmanager
def partition_proxy(target_url: str) -> Iterator[PartitionProxy]:
    with _proxy(PartitionProxy, target_url) as proxy:
        yield proxy


@contextmanager
def stall_proxy(target_url: str) -> Iterator[StallProxy]:
    with _proxy(StallProxy, target_url) as proxy:
        yield proxy


@contextmanager
def outage_proxy(target_url: str) -> Iterator[OutageProxy]:
    with _proxy(OutageProxy, target_url) as proxy:
        yield proxy


@contextmanager
def _proxy[P: OutageProxy](kind: type[P], target_url: str) -> Iterator[P]:
    proxy = kind(int(target_url.rsplit(":", 1)[1].split("/", 1)[0]))
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
