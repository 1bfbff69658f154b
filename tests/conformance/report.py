"""`python -m tests.conformance.report`: run every scenario, then rewrite docs/conformance.md.

The pass tables are regenerated from this run; the baseline block (expected failures, each with
its reason) is carried over from the current document unchanged.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from tests.conformance.suite import (
    _BASELINE,
    DOC,
    REVISION,
    Outcome,
    baseline,
    client_scenarios,
    run_client,
    run_server_requirements,
    scored,
    server_scenarios,
)
from tests.peers.launch import npm_package, running

INTRO = """# Conformance: the official MCP conformance suite

The npm package `@modelcontextprotocol/conformance` (pinned in `tests/peers/npm/package.json`,
run on Node 22) is the MCP project's own test of what an implementation must do. Its file
`requirements/{revision}.yaml` is the frozen answer to "what must pass to conform to {revision}";
the tests run exactly that set, one pytest test per scenario (marker `conformance`):

- **server**: every scenario against `python -m tasksapp.demoserver` started with its defaults,
  the way `manage.py demo` and a user run it. The fixtures the scenarios name (`test_*` tools,
  `greet`, `slow_compute`, `failing_job`, `confirm_delete`, …, the `test://` resources and the
  `test_*` prompts) sit beside the demo's own tools; see [demoserver.md](demoserver.md).
  Also run, though the requirement set does not score them: the `tasks-*` extension scenarios
  and the three pending ones. The `sep-2640-*` skills scenarios are out of scope.
- **client**: every scenario drives `python -m tasksapp.conformance URL` (the suite
  appends the URL and sets `MCP_CONFORMANCE_SCENARIO`). It plays each scenario with the
  library's public API; what a server asks (an elicitation, an MRTR round) and what a tool needs
  (its arguments) is filled into the dashboard's own forms by `tasksapp.schemaforms.operator`, as a
  person would. The `auth/*` scenarios run the dashboard's OAuth client
  (`tasksapp.mcpclient.oauth`, see [oauth.md](oauth.md)); where the dashboard sends a person's
  browser to the authorization server, the entry point follows the redirect itself. Also run:
  `json-schema-2020-12-preservation` and the client credentials extensions
  `auth/client-credentials-jwt` and `auth/client-credentials-basic` (with `--force`: extensions
  are off the spec's timeline).

A test fails on any check the suite reports as FAILURE or WARNING, and for a client also when
our client process exits non-zero (unless the scenario expects the client to refuse and the
suite scores the run as passed: a mismatched `iss`, `resource` or `issuer`, endless 403s) or
times out. A scenario listed in the baseline below is
reported by pytest as an expected failure with its reason, without running it (each run costs
a Node and a Python start for a known answer); the report command below runs every scenario,
baseline entries included, and fails when one of them starts passing (then remove the entry).

```sh
.venv/bin/python -m pytest -m conformance            # the scenarios, as CI runs them
.venv/bin/python -m tests.conformance.report         # run them all and regenerate this file
```

## Expected failures (baseline)

Each entry names the scenario and why it is expected to fail. Nothing else may fail.
"""


def _run_all() -> tuple[list[Outcome], list[Outcome]]:
    command = [sys.executable, "-m", "tasksapp.demoserver"]
    with running("demoserver", command, "demoserver listening on") as peer:
        outcomes = run_server_requirements(peer.url)
    servers = [outcomes[scenario] for scenario in server_scenarios()]
    with ThreadPoolExecutor(2) as pool:
        clients = list(pool.map(run_client, client_scenarios()))
    return servers, clients


def _table(outcomes: list[Outcome], leg: str, expected: dict[str, str]) -> list[str]:
    lines = [
        "| Scenario | Scored for " + REVISION + " | Checks passed | Failed or warned | Result |",
        "|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        result = (
            "pass" if outcome.ok else ("expected failure" if outcome.scenario in expected else "**FAIL**")
        )
        lines.append(
            f"| `{outcome.scenario}` | {'yes' if scored(outcome.scenario, leg) else 'no'} | {outcome.passed} "
            f"| {len(outcome.failures)} | {result} |"
        )
    return lines


def _summary(outcomes: list[Outcome], leg: str) -> str:
    required = [o for o in outcomes if scored(o.scenario, leg)]
    return f"{sum(o.ok for o in required)} of {len(required)} required scenarios pass; " + (
        f"{sum(o.ok for o in outcomes if not scored(o.scenario, leg))} of "
        f"{sum(not scored(o.scenario, leg) for o in outcomes)} run beside them pass."
    )


def render(servers: list[Outcome], clients: list[Outcome], block: str) -> str:
    expected = baseline()
    version = (npm_package("@modelcontextprotocol/conformance") / "package.json").read_text()
    pinned = version.split('"version": "', 1)[1].split('"', 1)[0]
    parts = [
        INTRO.format(revision=REVISION),
        block,
        "",
        f"## Results (@modelcontextprotocol/conformance {pinned}, {datetime.now(UTC):%Y-%m-%d})",
        "",
        f"### Server: `python -m tasksapp.demoserver` — {_summary(servers, 'server')}",
        "",
        *_table(servers, "server", expected["server"]),
        "",
        f"### Client: `python -m tasksapp.conformance` — {_summary(clients, 'client')}",
        "",
        *_table(clients, "client", expected["client"]),
        "",
    ]
    return "\n".join(parts)


def main() -> int:
    current = DOC.read_text() if DOC.exists() else ""
    match = _BASELINE.search(current)
    block = match.group(0) if match else "<!-- baseline -->\n```yaml\nserver: {}\nclient: {}\n```"
    servers, clients = _run_all()
    DOC.write_text(render(servers, clients, block))
    expected = {**baseline()["server"], **baseline()["client"]}
    wrong = 0
    for outcome in servers + clients:
        if outcome.ok and outcome.scenario in expected:
            print(f"{outcome.scenario} now passes: remove it from the baseline in {DOC}", file=sys.stderr)
            wrong += 1
        elif not outcome.ok and outcome.scenario not in expected:
            print(f"FAILED {outcome.scenario}:\n  " + "\n  ".join(outcome.failures), file=sys.stderr)
            wrong += 1
    print(f"wrote {DOC}: {len(servers)} server and {len(clients)} client scenarios")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
