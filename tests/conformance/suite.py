"""Running the official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
tests/peers/npm) one scenario at a time, and reading its verdicts.

Which scenarios: the frozen set `requirements/2026-07-28.yaml` that ships in the package (its
`server` and `client` lists), plus what it runs beside them without scoring: the `tasks-*`
extension scenarios and the pending server ones, the client's
`json-schema-2020-12-preservation`, and the client credentials auth extensions (SEP-1046). Not
the other auth extensions (enterprise-managed, DPoP, workload identity) or the sep-2640 skills.

The baseline of expected failures lives in docs/conformance.md (a YAML block); every entry
carries its reason, and an entry that starts passing is an error too (remove it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.peers.launch import ROOT, node_binary, npm_package

REVISION = "2026-07-28"
DOC = ROOT / "docs" / "conformance.md"
CLIENT_COMMAND = f"{sys.executable} -m tasksapp.conformance"
FAILING = ("FAILURE", "WARNING")
# Extension scenarios are off the spec's timeline: the suite runs them only with --force.
EXTENSIONS = ("auth/client-credentials-jwt", "auth/client-credentials-basic")
EXTRA_CLIENT = ("json-schema-2020-12-preservation", *EXTENSIONS)
SCENARIO_SECONDS = 120


@dataclass(frozen=True)
class Check:
    id: str
    status: str
    message: str

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Check:
        return cls(str(raw.get("id")), str(raw.get("status")), str(raw.get("errorMessage") or ""))


@dataclass
class Outcome:
    """One scenario's run: its checks, and for a client run how our client process ended."""

    scenario: str
    checks: list[Check] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # beyond the checks: crashes, client exit codes

    @property
    def passed(self) -> int:
        return sum(check.status == "SUCCESS" for check in self.checks)

    @property
    def failures(self) -> list[str]:
        bad = [f"{c.id}: {c.status} {c.message}".strip() for c in self.checks if c.status in FAILING]
        return bad + self.problems

    @property
    def ok(self) -> bool:
        return not self.failures


def requirements() -> dict[str, Any]:
    path = npm_package("@modelcontextprotocol/conformance") / "requirements" / f"{REVISION}.yaml"
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def server_scenarios() -> list[str]:
    spec = requirements()
    extra = [e["scenario"] for e in spec["not_scored"] if e["leg"] == "server"]
    return [*spec["server"], *extra]


def client_scenarios() -> list[str]:
    return [*requirements()["client"], *EXTRA_CLIENT]


def scored(scenario: str, leg: str) -> bool:
    return scenario in requirements()[leg]


def _conformance(
    *args: str, cwd: Path, extra_env: dict[str, str] | None = None, timeout: float = SCENARIO_SECONDS
) -> subprocess.CompletedProcess[str]:
    entry = npm_package("@modelcontextprotocol/conformance") / "dist" / "index.js"
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    return subprocess.run(
        [node_binary(), str(entry), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _checks(results: Path) -> list[Check]:
    found = sorted(results.rglob("checks.json"))
    return [Check.of(raw) for path in found for raw in json.loads(path.read_text())]


_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


def run_server_requirements(url: str, timeout: float = SCENARIO_SECONDS) -> dict[str, Outcome]:
    """`conformance server --requirements` once (as its authors run it): every server scenario of
    the set, scored or not, in one process; the outcome of each by scenario name."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        args = ("server", "--url", url, "--requirements", REVISION, "-o", tmp)
        done = _conformance(*args, cwd=Path(tmp), timeout=timeout)
        outcomes: dict[str, Outcome] = {}
        for folder in sorted(Path(tmp).iterdir()):
            if match := _RESULT_DIR.match(folder.name):
                outcomes[match["scenario"]] = Outcome(match["scenario"], _checks(folder))
    for scenario in server_scenarios():
        if scenario not in outcomes:
            outcomes[scenario] = Outcome(scenario, problems=[f"the suite recorded no result: {_tail(done)}"])
    return outcomes


def run_server(url: str, scenario: str) -> Outcome:
    """`conformance server` for one scenario at the revision's wire (as --requirements runs it)."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        done = _conformance(
            "server", "--url", url, "--scenario", scenario, "--spec-version", REVISION, "--force",
            "-o", tmp, cwd=Path(tmp),
        )  # fmt: skip
        outcome = Outcome(scenario, _checks(Path(tmp)))
    if not outcome.checks:
        outcome.problems.append(f"no checks recorded (exit {done.returncode}): {_tail(done)}")
    return outcome


def run_client(scenario: str) -> Outcome:
    """`conformance client` for one scenario, driving python -m tasksapp.conformance."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        force = ("--force",) if scenario in EXTENSIONS else ()
        done = _conformance(
            "client", "--command", CLIENT_COMMAND, "--scenario", scenario, "--spec-version", REVISION,
            *force, "-o", tmp, cwd=Path(tmp),
        )  # fmt: skip
        outcome = Outcome(scenario, _checks(Path(tmp)))
    log = done.stdout + done.stderr
    if "CLIENT TIMED OUT" in log:
        outcome.problems.append("the client timed out")
    # Some scenarios (a mismatched iss, resource or issuer; endless 403s) expect the client to
    # refuse and fail; the suite then still reports the run as passed, and so do we.
    allowed = "OVERALL: PASSED" in log
    if (exited := re.search(r"Client exited with code (\d+)", log)) and not allowed:
        outcome.problems.append(f"the client exited with code {exited.group(1)}")
    if not outcome.checks:
        outcome.problems.append(f"no checks recorded (exit {done.returncode}): {_tail(done)}")
    return outcome


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    return (done.stdout + done.stderr)[-1500:]


_BASELINE = re.compile(r"<!-- baseline -->\s*```yaml\n(.*?)```", re.S)


def baseline() -> dict[str, dict[str, str]]:
    """leg -> {scenario: reason}, from docs/conformance.md; a missing or empty reason is an error."""
    match = _BASELINE.search(DOC.read_text()) if DOC.exists() else None
    loaded = (yaml.safe_load(match.group(1)) if match else None) or {}
    entries: dict[str, dict[str, str]] = {"server": {}, "client": {}, "gateway": {}}
    for leg, scenarios in loaded.items():
        for scenario, reason in (scenarios or {}).items():
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"docs/conformance.md baseline: {leg} {scenario} needs a written reason")
            entries[leg][scenario] = reason.strip()
    return entries


def params(scenarios: list[str], leg: str) -> list[Any]:
    """pytest parameters: a baseline entry is reported as an expected failure with its reason and
    not run (each costs a Node and a Python start for a known answer); the report command runs
    every scenario, and says when a baseline entry starts passing."""
    import pytest

    expected = baseline()[leg]
    return [
        pytest.param(s, marks=pytest.mark.xfail(run=False, reason=expected[s])) if s in expected else s
        for s in scenarios
    ]


def verdict(outcome: Outcome, leg: str) -> str | None:
    """None when the outcome is as expected; otherwise what is wrong, for the assertion message."""
    reason = baseline()[leg].get(outcome.scenario)
    if reason is None:
        return None if outcome.ok else f"{outcome.scenario} failed:\n  " + "\n  ".join(outcome.failures)
    if outcome.ok:
        return f"{outcome.scenario} now passes: remove it from the baseline in docs/conformance.md"
    return None
