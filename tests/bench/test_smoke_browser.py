"""Smoke runs of the benchmarks that drive Chromium against `manage.py demo`: bench/ui.py live (server
change -> DOM) and bench/screenshots.py (the README's pictures). Each finishes and prints its
figures or writes its files; none is timed."""

from pathlib import Path

import pytest

from tests.bench.script import NUMBER, figures, run

pytestmark = [pytest.mark.bench, pytest.mark.browser]


def test_ui_live_prints_change_to_dom_latency() -> None:
    output = run("ui.py", "live", "--tasks", "1", "--n", "3", "--delay", "0.2", "--render-repeat", "2")
    [(samples,)] = figures(output, rf"^all samples: lastUpdatedAt -> DOM\s+(\d+)\s+{NUMBER}")
    assert int(samples) > 0
    figures(output, rf"^consumer render, task page \(4 partials\)\s+2\s+{NUMBER}")
    assert "changes the mirror recorded but the DOM never showed (nor a later one): 0" in output, output
    assert "demo stopped with SIGINT: cleanly" in output


def test_screenshots_writes_the_default_view(tmp_path: Path) -> None:
    run("screenshots.py", "--views", "light:1280:en", "--out", str(tmp_path), timeout=600)
    names = {"overview", "task-list", "task-detail", "task-running", "elicitation-form", "inbox"}
    assert {path.stem for path in tmp_path.glob("*.png")} == names
    assert all(path.stat().st_size > 10_000 for path in tmp_path.glob("*.png"))
