"""Fixtures shared by every test: the real MCP servers the tests talk to over loopback."""

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.peers.launch import (
    RunningPeer,
    demoserver_argv,
    everything_argv,
    fastmcp_argv,
    legacy_argv,
    running,
    sdk_argv,
    start_peer,
    ts2_argv,
)

if TYPE_CHECKING:
    from pytest_django.fixtures import Settings as SettingsWrapper

    from tasksapp.models import McpServer, RemoteTask

DEMO_READY = "demoserver listening on"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: "SettingsWrapper") -> None:
    """Every peer, receiver and authorization server of the tests is on loopback: allowed, as in
    `manage.py demo`. Tests of the address policy set OUTBOUND_ALLOWED_HOSTS themselves."""
    from tasksapp.services.outbound import LOOPBACK

    settings.OUTBOUND_ALLOWED_HOSTS = list(LOOPBACK)


@pytest.fixture(autouse=True)
def _default_language() -> Iterator[None]:
    """Each test starts and ends in the default language: a test client's request in zh-Hans leaves
    its language active in the test's thread (Django's LocaleMiddleware never deactivates), and a
    later test rendering outside a request would read Chinese."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


FASTMCP_READY = "fastmcp peer listening on"
LEGACY_READY = "legacy peer listening on"
# The fixtures that start a peer from a venv of its own (.venv-peer, .venv-legacy).
PEER_VENV_FIXTURES = frozenset({"fastmcp_server", "legacy_server", "sdk_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a peer venv, through any fixture, carries the fastmcp marker: so
    `-m "not fastmcp"` runs without the peer venvs. A fixture named by a parameter and fetched with
    `request.getfixturevalue` is not among the test's fixtures: such a parameter must carry the
    marker itself (`pytest.param(..., marks=pytest.mark.fastmcp)`), or collection fails."""
    for item in items:
        if PEER_VENV_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.fastmcp)
        elif item.get_closest_marker("fastmcp") is None and (named := _venv_fixture_parameters(item)):
            raise pytest.UsageError(
                f"{item.nodeid}: its parameter {named[0]!r} starts a peer from a venv of its own; "
                "give that parameter the fastmcp marker"
            )


def _venv_fixture_parameters(item: pytest.Item) -> list[str]:
    """The parameters of a test that name a fixture needing a peer venv, directly or through the
    fixtures it requests."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return []
    return [
        value
        for value in callspec.params.values()
        if isinstance(value, str) and _needs_peer_venv(item, value, set())
    ]


def _needs_peer_venv(item: pytest.Item, fixture: str, seen: set[str]) -> bool:
    if fixture in PEER_VENV_FIXTURES:
        return True
    if fixture in seen:
        return False
    seen.add(fixture)
    definitions = item.session._fixturemanager.getfixturedefs(fixture, item) or ()
    return any(_needs_peer_venv(item, name, seen) for d in definitions for name in d.argnames)


@pytest.fixture(scope="session")
def demo_server() -> Iterator[RunningPeer]:
    """The project's reference SEP-2663 server, polled fast so tests stay quick."""
    with running(
        "demoserver", demoserver_argv("--poll-interval-ms", "100", "--tools-page-size", "5"), DEMO_READY
    ) as peer:
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


@pytest.fixture(scope="session")
def sdk_server() -> Iterator[RunningPeer]:
    """The official Python SDK's server (mcp==2.3.0, 2026-07-28, MRTR, no tasks)."""
    with running("sdk", sdk_argv(), "sdk peer listening on") as peer:
        yield peer


@pytest.fixture(scope="session")
def ts2_server() -> Iterator[RunningPeer]:
    """The official TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0, default mode)."""
    with running("ts2", ts2_argv(), "ts2 peer listening on") as peer:
        yield peer


@pytest.fixture(scope="session")
def everything_server() -> Iterator[RunningPeer]:
    """@modelcontextprotocol/server-everything 2026.8.31: 2025-11-25 with its experimental tasks."""
    peer = start_peer(
        "everything",
        everything_argv(),
        "MCP Streamable HTTP Server listening on port",
        env={"PORT": "{port}"},
        url_of="http://127.0.0.1:{port}/mcp",
    )
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture
def demo_registered(transactional_db: None, demo_server: RunningPeer) -> "McpServer":
    """The reference server, registered through the service (so discovery really ran)."""
    from tasksapp import services

    return services.server_create(name="demo", url=demo_server.url, headers={}, user=None)


@pytest.fixture
def task(demo_registered: "McpServer") -> Iterator["RemoteTask"]:
    """A run_forever task on the reference server (a tick every 30 s), cancelled afterwards where the
    mirror still allows it."""
    from tasksapp import services

    started = services.call_start(
        server=demo_registered, tool="run_forever", arguments={"delay": 30}, user=None
    )
    assert started.task is not None
    yield started.task
    with contextlib.suppress(services.ServiceError):
        services.task_cancel(task=started.task, user=None)


@pytest.fixture
def fastmcp_registered(transactional_db: None, fastmcp_server: RunningPeer) -> "McpServer":
    from tasksapp import services

    return services.server_create(name="fastmcp", url=fastmcp_server.url, headers={}, user=None)


@pytest.fixture
def db_env(transactional_db: None) -> dict[str, str]:
    """Environment for subprocesses (workers) so they use this test's database."""
    import os

    from django.db import connection

    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{settings_dict['NAME']}"
    else:
        user, host = settings_dict["USER"] or "postgres", settings_dict["HOST"] or "127.0.0.1"
        url = f"postgres://{user}@{host}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(autouse=True)
def _roles(request: pytest.FixtureRequest) -> None:
    """Role groups come from a data migration, which a transactional test's flush removes."""
    if "transactional_db" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("transactional_db")
        from tasksapp.permissions import ensure_roles

        ensure_roles()
