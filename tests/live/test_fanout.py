"""A small run of bench/fanout.py: 50 tabs of the four live page kinds on two Daphne
processes, PostgreSQL and Redis, a worker and the reference server, real tasks changing. It
asserts correctness, not timing: every tab shows every final state it should (each task's last
status on the task list, the watched task on its page, each open question in the inbox, the
overview's final tiles), and no tab was refused or closed. Latency figures are the benchmark's
business (docs/benchmarks.md).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
@pytest.mark.redis
def test_fifty_tabs_on_two_web_processes_miss_no_final_state(tmp_path: Path) -> None:
    figures = tmp_path / "fanout.json"
    argv = [sys.executable, "bench/fanout.py", "--tabs", "50", "--daphne", "2", "--rate", "10"]
    argv += [
        "--seconds",
        "4",
        "--warm-up",
        "1",
        "--grace",
        "20",
        "--clients",
        "1",
        "--users",
        "4",
        "--modes",
        "current",
    ]
    argv += ["--task-seconds", "8", "--redis-db", "14", "--json", str(figures), "--logs", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(
        f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in tmp_path.glob("*.log")
    )
    assert done.returncode == 0, f"{done.stdout}{done.stderr}{logs}"
    [run] = json.loads(figures.read_text())

    assert run["refused"] == 0, run
    for page in ("tasks", "task", "inbox", "overview"):
        assert run[page]["tabs"] > 0 and run[page]["closed"] == 0, (page, run[page])
        assert run[page]["missing_final"] == 0, (page, run[page]["examples"], logs)
    assert run["tasks"]["deliveries"] > 0 and run["inbox"]["deliveries"] > 0, run  # changes did flow
