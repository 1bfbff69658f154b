"""The reference server as a user runs it, for the official conformance suite's server scenarios."""

from collections.abc import Iterator

import pytest

from tests.peers.launch import RunningPeer, running

DEMO_READY = "demoserver listening on"


@pytest.fixture(scope="session")
def reference_server() -> Iterator[RunningPeer]:
    """`python -m tasksapp.demoserver` with its defaults (no --debug, every tool on one page)."""
    import sys

    with running("demoserver", [sys.executable, "-m", "tasksapp.demoserver"], DEMO_READY) as peer:
        yield peer
