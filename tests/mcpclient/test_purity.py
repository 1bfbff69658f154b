"""tasksapp.mcpclient is pure protocol code: importing it imports neither Django nor any other part
of tasksapp (tests/test_import_graph.py holds the same for every import in its source, including
importlib's)."""

import subprocess
import sys

from tests.peers.launch import ROOT


def test_mcpclient_imports_nothing_from_django() -> None:
    probe = (
        "import sys, tasksapp.mcpclient, tasksapp.mcpclient.cli;"
        "import tasksapp.mcpclient.oauth;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'django'"
        " or m.startswith('tasksapp.') and not m.startswith('tasksapp.mcpclient'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, (
        f"mcpclient pulled in Django or other tasksapp modules: {run.stdout}{run.stderr}"
    )


def test_no_source_file_imports_django() -> None:
    for path in (ROOT / "tasksapp" / "mcpclient").rglob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            assert not (words[:1] in (["import"], ["from"]) and words[1].startswith("django")), path
