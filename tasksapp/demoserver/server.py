"""Running the app under uvicorn: graceful stream endings, the CLI server, a test thread."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from .app import MCP_PATH, DemoServerApp


def create_app(
    *,
    poll_interval_ms: int = 1000,
    keepalive_seconds: float = 15.0,
    debug: bool = False,
    allowed_hosts: Iterable[str] = (),
    tools_page_size: int = 100,
    state_file: Path | None = None,
    permissive_inputs: bool = False,
) -> DemoServerApp:
    """`allowed_hosts`: Host/Origin names accepted besides the loopback ones ("*": any).
    `state_file`: keep the tasks there across restarts (default: in memory only).
    `permissive_inputs`: send input requests of kinds the client did not declare (tests only)."""
    return DemoServerApp(
        poll_interval_ms=poll_interval_ms,
        keepalive_seconds=keepalive_seconds,
        debug=debug,
        allowed_hosts=allowed_hosts,
        tools_page_size=tools_page_size,
        state_file=state_file,
        permissive_inputs=permissive_inputs,
    )


class DemoUvicornServer(uvicorn.Server):
    """uvicorn.Server that ends listen streams *before* waiting for connections to close.

    Plain uvicorn would wait forever for a listen stream to finish, and the ASGI
    lifespan shutdown event only arrives after connections have closed.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        app: DemoServerApp,
        on_started: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.demo_app = app
        self._on_started = on_started

    @property
    def url(self) -> str:
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{MCP_PATH}"

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_started is not None:
            self._on_started(self.url)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.demo_app.end_streams()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Unlike uvicorn, do not re-raise the signal afterwards: a clean stop exits 0.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def build_server(
    app: DemoServerApp,
    host: str,
    port: int,
    log_level: str = "info",
    on_started: Callable[[str], None] | None = None,
) -> DemoUvicornServer:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        access_log=log_level in ("debug", "trace"),
        timeout_graceful_shutdown=5,
    )
    return DemoUvicornServer(config, app, on_started)


@dataclass
class RunningServer:
    url: str
    app: DemoServerApp
    _server: DemoUvicornServer
    _thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        """Ends listen streams gracefully, stops uvicorn and joins its thread."""
        self._server.should_exit = True
        self._thread.join(timeout)


def run_in_thread(
    host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning", **app_kwargs: Any
) -> RunningServer:
    """Starts the server in a daemon thread and returns once it accepts connections.

    The name it listens on is an allowed Host besides the loopback ones (DNS-rebinding check).
    """
    app_kwargs["allowed_hosts"] = [host, *app_kwargs.get("allowed_hosts", ())]
    app = create_app(**app_kwargs)
    started = threading.Event()
    urls: list[str] = []

    def on_started(url: str) -> None:
        urls.append(url)
        started.set()

    server = build_server(app, host, port, log_level, on_started)
    thread = threading.Thread(target=server.run, name="demoserver", daemon=True)
    thread.start()
    while not started.wait(0.05):
        if not thread.is_alive():
            raise RuntimeError(f"demoserver failed to start on {host}:{port}")
    return RunningServer(urls[0], app, server, thread)
