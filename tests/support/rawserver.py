"""Raw TCP servers on loopback, in a thread, for attacks at the network edge:

- Honeypot: accepts connections and records every byte it receives; never answers. A test that
  points something at it asserts that nothing ever arrived.
- Flood: answers each request with `head` and then `size` bytes of filler as fast as it can.
- Dripper: answers each connection with a fixed reply, one byte every `interval` seconds, for as
  long as the test runs (a slow-loris server: every read gets a byte before any read timeout).
"""

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class RawServer:
    port: int
    received: list[bytes] = field(default_factory=list)
    connections: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def bytes_received(self) -> bytes:
        return b"".join(self.received)


@contextmanager
def honeypot(host: str = "127.0.0.1") -> Iterator[RawServer]:
    """A listener that records every byte; `connections` counts who connected at all."""
    with _serving(host, _record) as server:
        yield server


@contextmanager
def dripper(reply: bytes, *, interval: float = 0.5, host: str = "127.0.0.1") -> Iterator[RawServer]:
    """A listener that reads what it is sent and answers `reply` one byte per `interval`."""

    def drip(conn: socket.socket, server: RawServer) -> None:
        conn.settimeout(interval)
        for byte in reply:
            try:
                server.received.append(conn.recv(65536))
            except TimeoutError:
                pass
            except OSError:
                return
            if server.stop.is_set():
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return

    with _serving(host, drip) as server:
        yield server


@contextmanager
def flood(
    head: bytes, size: int, *, filler: bytes = b"a" * 65536, host: str = "127.0.0.1"
) -> Iterator[RawServer]:
    """A listener that reads a request and answers `head` plus `size` bytes of `filler`."""

    def pour(conn: socket.socket, server: RawServer) -> None:
        conn.settimeout(5)
        try:
            server.received.append(conn.recv(65536))
            conn.sendall(head)
            sent = 0
            while sent < size and not server.stop.is_set():
                chunk = filler[: size - sent]
                conn.sendall(chunk)
                sent += len(chunk)
        except OSError:
            return

    with _serving(host, pour) as server:
        yield server


def _record(conn: socket.socket, server: RawServer) -> None:
    conn.settimeout(0.2)
    while not server.stop.is_set():
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return
        if not data:
            return
        server.received.append(data)


@contextmanager
def _serving(host: str, handle: Callable[[socket.socket, RawServer], None]) -> Iterator[RawServer]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(16)
    listener.settimeout(0.2)
    server = RawServer(port=listener.getsockname()[1])

    def accept() -> None:
        while not server.stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server.connections += 1
            threading.Thread(target=_handled, args=(conn,), daemon=True).start()

    def _handled(conn: socket.socket) -> None:
        with conn:
            handle(conn, server)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        thread.join(5)
        listener.close()
