"""The demo server is plain ASGI: importing it pulls in neither Django nor the mcp SDK nor any
other part of tasksapp (tests/test_import_graph.py holds the same for its source)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demoserver_imports_neither_django_nor_the_sdk() -> None:
    probe = (
        "import sys, tasksapp.demoserver, tasksapp.demoserver.__main__;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'mcp', 'fastmcp')"
        " or m.startswith('tasksapp.') and not m.startswith('tasksapp.demoserver'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"demoserver pulled in: {run.stdout}{run.stderr}"
