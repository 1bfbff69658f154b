"""A small HTTP proxy that adds headers (the official conformance suite has no option to send a
bearer token): every request is passed on as it came, Host and Origin included, with the extra
headers added; every answer comes back as it was sent, streamed (SSE included)."""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from aiohttp import web

from tests.peers.launch import free_port

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


def _app(target: str, extra: dict[str, str]) -> web.Application:
    session: dict[str, aiohttp.ClientSession] = {}

    async def start(app: web.Application) -> None:
        session["s"] = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))

    async def stop(app: web.Application) -> None:
        await session["s"].close()

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        headers += list(extra.items())
        body = await request.read()
        async with session["s"].request(
            request.method,
            target + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@contextmanager
def header_proxy(target: str, extra: dict[str, str]) -> Iterator[str]:
    """Serve the proxy on a free loopback port in a thread; yields its base URL (http://127.0.0.1:P)."""
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(target.rstrip("/"), extra))
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
