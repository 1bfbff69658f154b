"""A Daphne per test module serving the gateway, the reference server registered, and agents."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.support import daphne


@pytest.fixture(scope="module")
def gateway_base(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with daphne(MCP_GATEWAY_TRAFFIC_FLUSH_SECONDS="1") as base:
        yield base


@pytest.fixture
def demo_url(gateway_base: str, demo_registered: Any) -> str:
    """The gateway URL of the registered reference server."""
    return f"{gateway_base}/gateway/{demo_registered.pk}/mcp"


@pytest.fixture
def bot(demo_registered: Any) -> tuple[Any, str]:
    """An agent allowed to use the reference server, and its token."""
    from tasksapp.services.agents import agent_create

    return agent_create(name="bot", servers=[demo_registered], user=None)


@pytest.fixture
def token(bot: tuple[Any, str]) -> str:
    return bot[1]


@pytest.fixture(autouse=True)
def _english() -> Iterator[None]:
    """Messages asserted here are English, whatever language a test before chose in this thread."""
    from django.utils import translation

    with translation.override("en"):
        yield
