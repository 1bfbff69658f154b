"""Fixtures shared by every test: the real MCP servers the tests talk to over loopback."""

from collections.abc import Iterator

import pytest

from tests.peers.launch import RunningPeer, demoserver_argv, fastmcp_argv, legacy_argv, running

DEMO_READY = "demoserver listening on"
FASTMCP_READY = "fastmcp peer listening on"
LEGACY_READY = "legacy peer listening on"


@pytest.fixture(scope="session")
def demo_server() -> Iterator[RunningPeer]:
    """The project's reference SEP-2663 server, polled fast so tests stay quick."""
    with running("demoserver", demoserver_argv("--poll-interval-ms", "100"), DEMO_READY) as peer:
        yield peer


@pytest.fixture(scope="session")
def fastmcp_server() -> Iterator[RunningPeer]:
    """The third-party fastmcp-tasks server (tests/peers/fastmcp_server.py) in its own venv."""
    with running("fastmcp", fastmcp_argv(), FASTMCP_READY) as peer:
        yield peer


@pytest.fixture(scope="session")
def legacy_server() -> Iterator[RunningPeer]:
    """A real 2025-11-25 server: the official SDK's last 1.x release, in its own venv."""
    with running("legacy", legacy_argv(), LEGACY_READY) as peer:
        yield peer
