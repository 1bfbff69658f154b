"""Check 9 of §2.5: the `Mcp-Param-*` headers of a tools/call against its x-mcp-header arguments."""

from __future__ import annotations

from typing import Any

from .protocol import JsonObject, decode_header_value, header_mismatch


def annotated(input_schema: JsonObject) -> dict[str, str]:
    """Property name -> header name, for every property reached by `properties` with x-mcp-header."""
    properties = input_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        name: schema["x-mcp-header"]
        for name, schema in properties.items()
        if isinstance(schema, dict) and isinstance(schema.get("x-mcp-header"), str)
    }


def _rendered(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_param_headers(mapping: dict[str, str], arguments: Any, sent: tuple[tuple[str, str], ...]) -> None:
    """-32020 when a header is missing, extra, duplicated, undecodable or unequal to its argument."""
    arguments = arguments if isinstance(arguments, dict) else {}
    received: dict[str, str] = {}
    for name, value in sent:
        if name in received:
            raise header_mismatch(f"mcp-param-{name} header appears more than once")
        received[name] = value
    for prop, header in mapping.items():
        raw = received.pop(header.lower(), None)
        value = arguments.get(prop)
        if value is None:
            if raw is not None:
                raise header_mismatch(f"Mcp-Param-{header} was sent but argument '{prop}' is absent")
            continue
        if raw is None:
            raise header_mismatch(f"Mcp-Param-{header} header is required: argument '{prop}' is set")
        _compare(header, raw, _rendered(value))
    if received:
        extra = ", ".join(f"Mcp-Param-{name}" for name in sorted(received))
        raise header_mismatch(f"{extra}: no argument of this tool is mirrored into that header")


def _compare(header: str, raw: str, expected: str) -> None:
    try:
        decoded = decode_header_value(raw)
    except ValueError as exc:
        raise header_mismatch(f"Mcp-Param-{header} is not valid =?base64?…?= text") from exc
    if decoded != expected:
        raise header_mismatch(f"Mcp-Param-{header} header does not match the argument value")
