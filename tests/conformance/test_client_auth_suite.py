"""The official suite's auth/* client scenarios (the 25 of 2026-07-28 and the client credentials
extensions), each driving `python -m tasksapp.conformance` with the dashboard's OAuth
client. A file of their own, so that under `--dist loadfile` they run beside the other client
scenarios instead of after them; every scenario's servers listen on ports of their own."""

import pytest

from tests.conformance.suite import client_scenarios, params, run_client, verdict

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize(
    "scenario", params([s for s in client_scenarios() if s.startswith("auth/")], "client")
)
def test_auth_client_passes(scenario: str) -> None:
    problem = verdict(run_client(scenario), "client")
    assert problem is None, problem
