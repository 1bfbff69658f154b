"""The official conformance suite's client scenarios, each driving
`python -m tasksapp.conformance` (which answers through the dashboard's own forms).

One `conformance client --scenario` run per test: the suite's --requirements mode starts every
client at once, which a loaded 2-core machine cannot serve inside the suite's 30 s per client.
"""

import pytest

from tests.conformance.suite import client_scenarios, params, run_client, verdict

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize(
    "scenario", params([s for s in client_scenarios() if not s.startswith("auth/")], "client")
)
def test_client_passes(scenario: str) -> None:
    problem = verdict(run_client(scenario), "client")
    assert problem is None, problem
