"""No module under tests/ or bench/ imports a test module (`test_*`): helpers more than one test
file uses live in tests/support/ (or in a folder's own helper module, or a conftest.py), so that
test files stay independent of each other.

Read from the source (ast), not by importing: every `import tests.….test_x`, `from tests.… import`
naming a `test_*` module or importing from one, at module level or inside a function.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _is_test_module(dotted: str) -> bool:
    return dotted.split(".")[-1].startswith("test_")


def imported_test_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for each test module the tree imports; relative imports count too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name) for a in node.names if any(map(_is_test_module, a.name.split(".")))
            ]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if any(_is_test_module(part) for part in module.lstrip(".").split(".") if part):
                found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names if _is_test_module(a.name)]
    return found


def test_the_check_sees_every_form_of_importing_a_test_module() -> None:
    source = (
        "import tests.live.test_live\n"
        "from tests.live.test_live import socket\n"
        "from tests.live import test_live\n"
        "from .test_live import socket\n"
        "def f():\n"
        "    from tests.engine.test_worker import started_on\n"
        "import tests.support.opsdata\n"
        "from tests.support.opsdata import person\n"
    )
    assert [line for line, _ in imported_test_modules(ast.parse(source))] == [1, 2, 3, 4, 6]


def test_no_module_under_tests_or_bench_imports_a_test_module() -> None:
    offences = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "node_modules" not in path.parts
        for line, module in imported_test_modules(ast.parse(path.read_text(), str(path)))
    ]
    assert not offences, "move the shared helper into tests/support/:\n" + "\n".join(offences)
