"""One POSTed JSON-RPC message checked against its headers, as a 2026-07-28 server must (§2.5).

The gateway is a server to its agents: what it would forward with headers of its own making is
first held to the rules a server applies, so an agent's mistake gets the error the upstream would
have sent, not a silently repaired request.
"""

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from tasksapp.gateway.errors import (
    RequestId,
    header_mismatch,
    invalid_params,
    invalid_request,
    parse_error,
    unsupported_version,
)
from tasksapp.gateway.http import Headers
from tasksapp.mcpclient.wire import (
    META_CAPABILITIES,
    META_VERSION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    InputKinds,
)

ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
# Methods whose Mcp-Name names something in params (tasks/* are checked where they are served).
_NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_SENTINEL = ("=?base64?", "?=")

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """A request that passed every envelope and header check."""

    id: RequestId
    method: str
    params: JsonObject
    capabilities: JsonObject
    mcp_name: str | None
    param_headers: tuple[tuple[str, str], ...]  # (lowercased X of Mcp-Param-X, value as sent)

    @property
    def declares_tasks(self) -> bool:
        extensions = self.capabilities.get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)

    @property
    def input_kinds(self) -> InputKinds:
        """The kinds of input request this request says its client can answer."""
        return InputKinds.declared(self.capabilities)


def parse_message(body: bytes) -> JsonObject:
    """The body as one JSON-RPC request or notification object (-32700, -32600 otherwise)."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise parse_error() from None
    if not isinstance(message, dict):
        raise invalid_request("Invalid Request: expected one JSON-RPC object (no batches)")
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        raise invalid_request("Invalid Request: not a JSON-RPC 2.0 request")
    if "id" in message and not _is_request_id(message["id"]):
        raise invalid_request("Invalid Request: id must be a string or an integer")
    if "params" in message and not isinstance(message["params"], dict):
        raise invalid_request("Invalid Request: params must be an object")
    return message


def check_duplicates(headers: Headers) -> None:
    for name in ROUTING_HEADERS:
        if len(headers.get_all(name)) > 1:
            raise header_mismatch(f"{name} header appears more than once")


def check_call(message: JsonObject, headers: Headers) -> Call:
    """Envelope, then headers, in the reference SDK's order; the first failure wins."""
    method: str = message["method"]
    params: JsonObject = message.get("params") or {}
    _refuse_legacy(method, params, headers)
    version, capabilities = _meta(params)
    header = headers.get("mcp-protocol-version")
    if header is None:
        raise header_mismatch("mcp-protocol-version header is required")
    if header != version:
        raise header_mismatch("mcp-protocol-version header does not match params._meta")
    if headers.get("mcp-method") != method:
        raise header_mismatch("mcp-method header does not match the request body's method")
    name = _name(headers)
    _check_name(method, params, name)
    if version != PROTOCOL_VERSION:
        raise unsupported_version(version)
    param_headers = tuple(
        (key, decode_header_value(value)) for key, value in headers.with_prefix("mcp-param-")
    )
    return Call(message["id"], method, params, capabilities, name, param_headers)


def check_notification(headers: Headers) -> None:
    version = headers.get("mcp-protocol-version")
    if version is not None and version != PROTOCOL_VERSION:
        raise unsupported_version(version)


def decode_header_value(value: str) -> str:
    """§2.3: a =?base64?…?= value decoded, any other as it is."""
    if not (value.startswith(_SENTINEL[0]) and value.endswith(_SENTINEL[1])):
        return value
    try:
        return base64.b64decode(value[len(_SENTINEL[0]) : -len(_SENTINEL[1])], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise header_mismatch("a header value is not valid =?base64?…?= text") from None


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _refuse_legacy(method: str, params: JsonObject, headers: Headers) -> None:
    """An older revision's request (an `initialize` handshake, a legacy version header, no envelope)
    gets -32022 naming the one version spoken here, which tells a legacy client what to do."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return
    header = headers.get("mcp-protocol-version")
    if method != "initialize" and (header is None or header == PROTOCOL_VERSION):
        return
    offered = params.get("protocolVersion") if method == "initialize" else None
    raise unsupported_version(offered if isinstance(offered, str) else header or "")


def _meta(params: JsonObject) -> tuple[str, JsonObject]:
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise invalid_params("params._meta is required (protocolVersion, clientCapabilities)")
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise invalid_params(f"params._meta is missing {META_VERSION}")
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise invalid_params(f"params._meta is missing {META_CAPABILITIES}")
    return version, capabilities


def _name(headers: Headers) -> str | None:
    raw = headers.get("mcp-name")
    return None if raw is None else decode_header_value(raw)


def _check_name(method: str, params: JsonObject, name: str | None) -> None:
    param = _NAME_PARAMS.get(method)
    if param is None:
        return
    expected = params.get(param)
    if not isinstance(expected, str):
        raise invalid_params(f"{method} needs params.{param} (a string)")
    if name is None:
        raise header_mismatch(f"mcp-name header is required for {method}")
    if name != expected:
        raise header_mismatch(f"mcp-name header does not match the request body's '{param}'")
