"""A HostileServer (tests/mcpclient/hostile_server.py) on its own event loop in a thread, for
synchronous tests: services, views and a dashboard in another process talk to it over loopback.
A script that must wait for the test uses a threading.Event through asyncio.to_thread."""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.mcpclient.hostile_server import HostileServer, Script


@contextmanager
def serving(script: Script) -> Iterator[HostileServer]:
    loop = asyncio.new_event_loop()
    server = HostileServer(script)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
