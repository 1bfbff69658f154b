"""The import graph of tasksapp/ holds the architecture docs/contributing.md describes.

Read from the source (ast), not by importing: every `import`, `from … import` (at module level or
inside a function) and `importlib.import_module("…")` / `__import__("…")` with a literal name is
an arrow from the module that says it to the module it names (`from package import module`
names the module; anything else names the package's __init__).

- No import circle.
- Layers, from the top down (LAYERS): a module may import its own layer and the layers below,
  never one above.
- tasksapp/mcpclient/ (the MCP client library) and tasksapp/demoserver/ (the reference server)
  import nothing of tasksapp outside themselves.
- The live layer (tasksapp/live/, tasksapp/consumers.py) imports nothing from tasksapp/views/.

What the code does today and this layout does not want yet is listed in KNOWN_*, each entry
with what opens it: the lists may only shrink (a test below fails when an entry is no longer
needed, so that it is struck).
"""

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# From the top down; a module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "entry points: URLs, the websocket route, the gateway, admin, commands, app setup",
        (
            "tasksapp.urls",
            "tasksapp.routing",
            "tasksapp.consumers",
            "tasksapp.gateway",
            "tasksapp.admin",
            "tasksapp.management",
            "tasksapp.apps",
            "tasksapp.checks",
            "tasksapp.conformance",
        ),
    ),
    (
        "interfaces: HTTP views, live pages, template tags, middleware",
        (
            "tasksapp.views",
            "tasksapp.live",
            "tasksapp.templatetags",
            "tasksapp.middleware",
            "tasksapp.logfilters",
            "tasksapp.healthcheck",
        ),
    ),
    ("presenters: what views and live pages both render from", ("tasksapp.presenters",)),
    ("the worker", ("tasksapp.engine",)),
    ("services: the writes, notifications", ("tasksapp.services", "tasksapp.notify", "tasksapp.retention")),
    (
        "reads: queries and figures over the models",
        (
            "tasksapp.counts",
            "tasksapp.lifecycle",
            "tasksapp.serializers",
            "tasksapp.traffic",
            "tasksapp.metrics",
            "tasksapp.exports",
            "tasksapp.search",
        ),
    ),
    (
        "models",
        (
            "tasksapp.models",
            "tasksapp.prefs",
            "tasksapp.sessions",
            "tasksapp.permissions",
            "tasksapp.login_throttle",
            "tasksapp.signin",
        ),
    ),
    (
        "schema-driven forms",
        ("tasksapp.schemaforms",),
    ),
    (
        "foundations: protocol library, reference server, single-idea helpers",
        (
            "tasksapp.mcpclient",
            "tasksapp.demoserver",
            "tasksapp.lib",
            "tasksapp.events",
            "tasksapp.redislayer",
            "tasksapp.queryparams",
            "tasksapp.toolpaths",
        ),
    ),
]

# Circles today, and what opens each.
KNOWN_CIRCLES: set[frozenset[str]] = set()
# Imports from a lower layer up to a higher one today (importer, imported).
KNOWN_UPWARD: set[tuple[str, str]] = set()
# The live layer's imports from views/ today (what both render from belongs in presenters/).
KNOWN_LIVE_TO_VIEWS: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "tasksapp").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(tree: ast.Module, package: str, known: set[str]) -> list[str]:
    """What each import in `tree` names, as module paths (`package`: the one the code is in)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            # `from package import module` names the module; any other name, the module it is in.
            names += [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append(node.args[0].value)
    return names


@cache
def graph() -> dict[str, set[str]]:
    """module -> the tasksapp modules it imports (the package tasksapp itself left out: it is empty)."""
    found = modules()
    arrows: dict[str, set[str]] = defaultdict(set)
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for target in imported_names(ast.parse(path.read_text()), package, set(found)):
            while target.startswith("tasksapp.") and target not in found:  # an attribute's path
                target = target.rpartition(".")[0]
            if target in found and target not in (name, "tasksapp"):
                arrows[name].add(target)
    return arrows


def circles(arrows: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(arrows):
        if start in index:
            continue
        work = [(start, iter(sorted(arrows.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(arrows.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer from the bottom)
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), len(LAYERS) - position)
    return None if best is None else best[1]


def test_the_graph_reads_imports_made_by_name() -> None:
    tree = ast.parse("import importlib\ndef f():\n    importlib.import_module('tasksapp.models')\n")
    assert imported_names(tree, "tasksapp", set()) == ["importlib", "tasksapp.models"]


def test_there_is_no_import_circle_but_the_known_ones() -> None:
    found = circles(graph())
    assert found - KNOWN_CIRCLES == set(), "a new import circle"
    assert KNOWN_CIRCLES - found == set(), "a known circle is open now: strike it from KNOWN_CIRCLES"


def test_every_module_has_a_layer() -> None:
    assert [name for name in modules() if name != "tasksapp" and layer_of(name) is None] == []


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = {
        (source, target)
        for source, targets in graph().items()
        for target in targets
        if (layer_of(source) or 0) < (layer_of(target) or 0)
    }
    assert upward - KNOWN_UPWARD == set(), "an import from a lower layer up to a higher one"
    assert KNOWN_UPWARD - upward == set(), "strike what is no longer imported from KNOWN_UPWARD"


def test_the_protocol_library_and_the_reference_server_import_only_themselves() -> None:
    for package in ("tasksapp.mcpclient", "tasksapp.demoserver"):
        outside = {
            (source, target)
            for source, targets in graph().items()
            if source == package or source.startswith(package + ".")
            for target in targets
            if not (target == package or target.startswith(package + "."))
        }
        assert outside == set(), package


def test_the_live_layer_imports_nothing_from_views() -> None:
    live = {
        (source, target)
        for source, targets in graph().items()
        if source.startswith("tasksapp.live") or source == "tasksapp.consumers"
        for target in targets
        if target == "tasksapp.views" or target.startswith("tasksapp.views.")
    }
    assert live - KNOWN_LIVE_TO_VIEWS == set(), "the live layer imports from views/"
    assert KNOWN_LIVE_TO_VIEWS - live == set(), "strike what is no longer imported from KNOWN_LIVE_TO_VIEWS"
