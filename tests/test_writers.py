"""Services write the models; the few other modules that write own named rows, listed in the
services package's docstring (tasksapp/services/__init__.py). Read from the source (ast): a write
is a call of save, delete, create, update, bulk_create, bulk_update, get_or_create or
update_or_create on a manager or queryset (`Model.objects…`, `….filter(…)…`), or save, delete,
bulk_*, get_or_create, update_or_create on anything (`task.save()`)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRITES = {
    "save",
    "delete",
    "create",
    "update",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}
ANY_RECEIVER = WRITES - {"create", "update"}  # dicts and sets have update(); nothing else says save()
QUERYSETS = {"objects", "filter", "exclude", "all", "select_for_update"}
# Modules other than tasksapp/services/ that write, as the services docstring names them.
OWNERS = {
    "tasksapp.engine.store",
    "tasksapp.notify.scan",
    "tasksapp.notify.security",
    "tasksapp.notify.send",
    "tasksapp.sessions",
    "tasksapp.login_throttle",
    "tasksapp.permissions",
    "tasksapp.management.commands.demo",
    "tasksapp.healthcheck",  # /healthz's write probe
    "tasksapp.retention.purge",  # a branch in flight adds retention/
    "tasksapp.retention.chores",
}
NOT_MIRROR = ("migrations", "mcpclient", "demoserver")  # no models there (migrations: history)


def receiver_chain(node: ast.expr) -> list[str]:
    """`Task.objects.filter(x=1).exclude()` -> ["exclude", "filter", "objects", "Task"]."""
    chain: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            if isinstance(node, ast.Name):
                chain.append(node.id)
            return chain


def writes_in(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            chain = receiver_chain(node.func.value)
            if node.func.attr in ANY_RECEIVER or QUERYSETS & set(chain):
                lines.append(node.lineno)
    return lines


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "tasksapp").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if not any(part in NOT_MIRROR for part in parts):
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def writers() -> dict[str, list[int]]:
    found = {}
    for module, path in modules().items():
        lines = writes_in(path.read_text())
        if lines:
            found[module] = lines
    return found


def test_the_scan_sees_writes_and_not_dict_updates() -> None:
    source = (
        "def f(task, d):\n    d.update(a=1)\n    task.save()\n    Task.objects.filter(pk=1).update(a=2)\n"
    )
    assert writes_in(source) == [3, 4]


def test_only_services_and_the_named_owners_write() -> None:
    found = writers()
    others = {module: lines for module, lines in found.items() if not module.startswith("tasksapp.services")}
    assert {module: lines for module, lines in others.items() if module not in OWNERS} == {}
    present = {owner for owner in OWNERS if owner in modules()}
    assert present - set(others) == set(), (
        "an owner no longer writes: strike it here and in services' docstring"
    )


def test_the_services_docstring_names_every_owner() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "tasksapp" / "services" / "__init__.py").read_text())) or ""
    assert [owner for owner in sorted(OWNERS) if owner not in doc] == []
