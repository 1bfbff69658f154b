"""Smoke runs of the worker benchmarks at a tiny size: bench/worker.py (one worker in-process, its
bare-aiohttp rounds and the push stage) and bench/workers.py (`manage.py worker` processes sharing
tasks on PostgreSQL). Each finishes and prints its figures; none is timed."""

import json
import secrets
from pathlib import Path

import pytest

from tests.bench.script import NUMBER, figures, run

pytestmark = pytest.mark.bench


def test_worker_prints_its_table_and_the_cpu_ratio(tmp_path: Path) -> None:
    out = tmp_path / "worker.json"
    output = run(
        "worker.py", "--tasks", "40", "--warmup", "0.5", "--measure", "5.5", "--baseline", "0.2",
        "--rounds", "2", "--round-seconds", "1", "--push-tasks", "1", "--push-steps", "3",
        "--push-delay", "0.1", "--no-pin", "--json", str(out),
    )  # fmt: skip
    figures(output, rf"^\| 40 \| CPU per poll <= 1.5x bare aiohttp \| {NUMBER}x \|")
    [window] = json.loads(out.read_text())["runs"]
    assert window["polls"] > 0 and window["errors"] == 0, window  # a 5.5 s window sees every task once
    assert window["mirror_writes"] == 0


@pytest.mark.postgres
def test_workers_prints_polls_per_worker() -> None:
    output = run(
        "workers.py", "--tasks", "60", "--workers", "1", "--warmup", "1", "--measure", "5.5",
        "--database-url", f"postgres://postgres@127.0.0.1:5432/bench_workers_smoke_{secrets.token_hex(4)}",
    )  # fmt: skip
    [(held, polls)] = figures(output, rf"^\| 1 \| bench-w1 \| (\d+) \| ({NUMBER}) \|")
    assert int(held) == 60 and float(polls) > 0
