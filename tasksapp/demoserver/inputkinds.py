"""Which client capability each kind of input request needs (PROTOCOL.md §2.1, §6).

A server may send only the kinds a request declared: form elicitation needs `elicitation` (`{}`
alone means form mode only), URL elicitation `elicitation.url`, sampling `sampling` (with tools,
`sampling.tools`), `roots/list` `roots`. The reference server refuses to send any other, with
-32021 naming what is missing, unless it was started permissive (`--permissive-inputs`, for
tests of a client facing a server that does not check, as the SDK's does not).
"""

from __future__ import annotations

from collections.abc import Mapping

from .protocol import JsonObject, RpcError, missing_client_capability


def missing_capabilities(requests: Mapping[str, JsonObject], capabilities: JsonObject) -> JsonObject:
    """The ClientCapabilities object the requests need beyond `capabilities` ({} when none)."""
    missing: JsonObject = {}
    for request in requests.values():
        for name, needed in _needs(request, capabilities).items():
            missing.setdefault(name, {}).update(needed)
    return missing


def refusal(what: str, missing: JsonObject) -> RpcError:
    names = ", ".join(_names(missing))
    return missing_client_capability(
        f"{what} needs the client capability {names}, which this request did not declare; nothing was sent.",
        missing,
    )


def _needs(request: JsonObject, capabilities: JsonObject) -> JsonObject:
    method = request.get("method")
    given = request.get("params")
    params: JsonObject = given if isinstance(given, dict) else {}
    declared = capabilities.get(_capability(method)) if isinstance(method, str) else None
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        modes = declared if isinstance(declared, dict) else None
        if modes is None:
            return {"elicitation": {mode: {}}}
        explicit = "form" in modes or "url" in modes
        if (mode == "url" and "url" not in modes) or (mode == "form" and explicit and "form" not in modes):
            return {"elicitation": {mode: {}}}
        return {}
    if method == "sampling/createMessage":
        if not isinstance(declared, dict):
            return {"sampling": {"tools": {}} if params.get("tools") else {}}
        return {"sampling": {"tools": {}}} if params.get("tools") and "tools" not in declared else {}
    if method == "roots/list":
        return {} if isinstance(declared, dict) else {"roots": {}}
    return {}


def _capability(method: str) -> str:
    return {"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}.get(method, "roots")


def _names(missing: JsonObject) -> list[str]:
    names = []
    for name, sub in missing.items():
        names += [f"'{name}.{part}'" for part in sub] if sub else [f"'{name}'"]
    return names
