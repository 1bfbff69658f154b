"""The official conformance suite's server scenarios against `python -m tasksapp.demoserver`.

The suite runs once per session with --requirements (one Node process for every scenario, as
its authors run it); each scenario is then its own test, failing on any check of its own.
"""

from collections.abc import Iterator

import pytest

from tests.conformance.suite import Outcome, params, run_server_requirements, server_scenarios, verdict
from tests.peers.launch import RunningPeer

# Under `pytest -n 2 --dist loadfile` one worker runs this whole file, so the suite runs once.
pytestmark = pytest.mark.conformance


@pytest.fixture(scope="session")
def server_outcomes(reference_server: RunningPeer) -> Iterator[dict[str, Outcome]]:
    yield run_server_requirements(reference_server.url)


@pytest.mark.parametrize("scenario", params(server_scenarios(), "server"))
def test_reference_server_passes(scenario: str, server_outcomes: dict[str, Outcome]) -> None:
    problem = verdict(server_outcomes[scenario], "server")
    assert problem is None, problem
