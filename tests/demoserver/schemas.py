"""Validation against the official JSON Schemas, vendored byte for byte in schemas/.

schema-2026-07-28.json: modelcontextprotocol/modelcontextprotocol schema/2026-07-28/schema.json,
git blob 213c58f6d9a1c2ce6ad055afe90bbdb095a29ee8. tasks-extension-schema-draft.json:
modelcontextprotocol/ext-tasks schema/draft/schema.json, git blob
2d6cfbe6b7dfc9f1174c5ac7137b6c7d736838f6 (see PROTOCOL.md §0.2).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

_HERE = Path(__file__).parent / "schemas"


@cache
def _defs(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((_HERE / name).read_text())["$defs"]
    return loaded


def _validate(file: str, definition: str, instance: Any) -> None:
    schema = {"$ref": f"#/$defs/{definition}", "$defs": _defs(file)}
    jsonschema.Draft202012Validator(schema).validate(instance)


def core(definition: str, instance: Any) -> None:
    _validate("schema-2026-07-28.json", definition, instance)


def tasks(definition: str, instance: Any) -> None:
    _validate("tasks-extension-schema-draft.json", definition, instance)
