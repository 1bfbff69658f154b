"""The set-up script finds a Python 3.12+ on its own, or says clearly what is missing."""

import shutil
import subprocess

import pytest

from tests.peers.launch import ROOT


def test_setup_without_any_python_312_says_what_is_needed(tmp_path: object) -> None:
    bare_path = "/usr/bin:/bin"  # Debian's python3 here is 3.11, and pyenv is not on this PATH
    if shutil.which("python3.12", path=bare_path) or shutil.which("python3.13", path=bare_path):
        pytest.skip("this machine has a Python 3.12+ on the plain PATH: there is nothing to refuse")
    run = subprocess.run(
        ["bash", str(ROOT / ".ci" / "setup")],
        capture_output=True,
        text=True,
        env={"PATH": bare_path, "HOME": "/nonexistent"},
        timeout=60,
    )
    assert run.returncode == 1
    assert "needs Python 3.12 or newer" in run.stderr and "pyenv install" in run.stderr


def test_setup_finds_a_python_through_pyenv_or_path() -> None:
    probe = (
        'source <(sed -n "/^python_ok()/,/^}/p; /^find_python()/,/^}/p" .ci/setup); '
        'find_python && "$(find_python)" -c "import sys; print(sys.version_info >= (3, 12))"'
    )
    run = subprocess.run(["bash", "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("True")
