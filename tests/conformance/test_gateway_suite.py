"""The official conformance suite's server scenarios through the gateway, in front of the reference
server: the 2026-07-28 requirement set and every tasks-* scenario, with a proxy adding the agent's
token (the suite has no header option). Tasks are served from the mirror (read through at the
task's poll interval: no worker runs here)."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.header_proxy import header_proxy
from tests.conformance.suite import Outcome, params, run_server_requirements, server_scenarios, verdict
from tests.gateway.support import daphne
from tests.peers.launch import RunningPeer

# The database mark makes pytest-django create the test database the gateway's Daphne serves.
pytestmark = [pytest.mark.conformance, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def gateway_outcomes(
    django_db_setup: None, django_db_blocker: Any, reference_server: RunningPeer
) -> Iterator[dict[str, Outcome]]:
    from tasksapp import services
    from tasksapp.services.agents import agent_create

    with django_db_blocker.unblock():
        server = services.server_create(name="reference", url=reference_server.url, headers={}, user=None)
        _, token = agent_create(name="conformance", servers=[server], user=None)
    with daphne() as base, header_proxy(base, {"Authorization": f"Bearer {token}"}) as proxy:
        yield run_server_requirements(f"{proxy}/gateway/{server.pk}/mcp", timeout=300)


@pytest.mark.parametrize("scenario", params(server_scenarios(), "gateway"))
def test_the_gateway_passes(scenario: str, gateway_outcomes: dict[str, Outcome]) -> None:
    problem = verdict(gateway_outcomes[scenario], "gateway")
    assert problem is None, problem
