"""Smoke runs of the PostgreSQL page benchmarks at a tiny size: bench/pages.py (each page beside its
own SQL replayed alone), bench/export.py (the CSV export under Daphne beside a bare cursor),
bench/flower.py (the task list beside Flower's) and bench/fanout_cost.py (Daphne CPU per live frame
beside bare channels_redis consumers).
Each finishes and prints its figures; none is timed."""

import json
import secrets
from pathlib import Path

import pytest

from tests.bench.script import NUMBER, figures, run

pytestmark = [pytest.mark.bench, pytest.mark.postgres]


def database() -> str:
    return f"postgres://postgres@127.0.0.1:5432/bench_smoke_{secrets.token_hex(4)}"


def test_pages_prints_each_page_beside_its_sql() -> None:
    output = run(
        "pages.py", "--tasks", "300", "--events", "60", "--open-requests", "5", "--rounds", "1",
        "--extra-servers", "2", "--database-url", database(),
    )  # fmt: skip
    rows = figures(
        output, rf"^\| ([^|]+) \| {NUMBER} \| {NUMBER} \| \*\*{NUMBER}x\*\* \| .* \| (\d+) \| \d+ \|$"
    )
    labels = [label for label, _ in rows]
    assert labels[:2] == ["overview /", "task list /tasks/"] and labels[2].startswith("task page, 6")
    assert len(rows) == 7 and all(int(queries) > 0 for _, queries in rows)
    figures(output, r"^- servers /servers/: \d+ queries at 1 server\(s\), \d+ at 3: ")


def test_export_prints_first_byte_total_and_memory_beside_the_bare_cursor() -> None:
    output = run("export.py", "--tasks", "200", "--rounds", "1")
    rows = figures(
        output,
        rf"^\| (product, operator|product, viewer|bare) \| {NUMBER} \| {NUMBER} \| {NUMBER} \| (\S+) \|",
    )
    assert [mode for mode, _ in rows] == ["product, operator", "product, viewer", "bare"]
    assert {lines for _, lines in rows} == {"201"}  # the header and every task, in each run
    figures(output, rf"^\| bare \| {NUMBER} \| {NUMBER} \| \*\*1.00x\*\* \|")


def test_flower_prints_the_task_list_beside_flowers() -> None:
    """Flower is installed in a venv of its own on first use (kept in ~/.cache)."""
    output = run(
        "flower.py", "--tasks", "120", "--rounds", "1", "--requests", "3", "--users", "3", "--seconds", "1",
        timeout=600,
    )  # fmt: skip
    rows = figures(
        output, rf"^\| (dashboard|Flower|Flower, datatable only) \| {NUMBER} \| \*\*{NUMBER}x\*\* \|"
    )
    assert [target for (target,) in rows] == ["dashboard", "Flower", "Flower, datatable only"]
    figures(output, r"^Flower: 120 tasks in its state")


@pytest.mark.redis
def test_fanout_cost_prints_cpu_per_frame_beside_the_baselines(tmp_path: Path) -> None:
    out = tmp_path / "fanout_cost.json"
    output = run(
        "fanout_cost.py", "--tabs", "3", "--seconds", "1", "--warm-up", "0.5", "--modes", "all",
        "--frame-bytes", "900", "--redis-db", "10", "--database-url", database(), "--json", str(out),
    )  # fmt: skip
    rows = figures(output, rf"^\| (bare-hub|bare-group|task list|task page) \| {NUMBER} \({NUMBER}x\) \|$")
    assert [mode for (mode,) in rows] == ["bare-hub", "bare-group", "task list", "task page"] * 2
    figures(output, rf"^baselines' frame {NUMBER} bytes; load average ")
    measured = json.loads(out.read_text())["runs"]
    assert [one["mode"] for one in measured] == ["bare-hub", "bare-group", "list", "page"]
    for one in measured:  # every socket opened and received frames (how many is the figures' business)
        assert one["opened"] == 3 and one["frames"] > 0 and one["expected"] > 0, one
