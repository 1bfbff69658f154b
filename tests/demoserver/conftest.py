"""The demo server under test, run in a background thread of the test process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasksapp.demoserver import RunningServer, run_in_thread

from .wire import Wire


@pytest.fixture(scope="session")
def demo() -> Iterator[RunningServer]:
    server = run_in_thread(debug=True, poll_interval_ms=100, keepalive_seconds=0.3, tools_page_size=5)
    yield server
    server.stop()


@pytest.fixture
def wire(demo: RunningServer) -> Iterator[Wire]:
    client = Wire(demo.url)
    yield client
    client.close()
