"""Running a bench/ script as its smoke test does: in its own process, at a tiny size, from the
project root; a failure shows the end of its output."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Set by the browser tests' conftest for Playwright; a bench script must run without it.
_DROPPED = ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL", "DATABASE_URL", "DEBUG")


def run(script: str, *args: str, timeout: float = 300) -> str:
    """Run `bench/<script> args...`; returns its standard output once it exited 0."""
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, str(ROOT / "bench" / script), *args]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{' '.join(argv[1:])} exited {done.returncode}\n--- stdout\n{done.stdout[-6000:]}"
        f"\n--- stderr\n{done.stderr[-6000:]}"
    )
    return done.stdout


def figures(output: str, pattern: str) -> list[tuple[str, ...]]:
    """Every match of `pattern` (a regex over whole lines) in the output; at least one."""
    found = re.findall(pattern, output, re.M)
    assert found, f"no line matching {pattern!r} in:\n{output[-6000:]}"
    return [match if isinstance(match, tuple) else (match,) for match in found]


NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"
