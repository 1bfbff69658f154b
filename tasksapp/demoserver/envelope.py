"""Validation of one POSTed JSON-RPC message against its HTTP headers (PROTOCOL.md §2.5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .asgi import Headers
from .protocol import (
    META_CAPABILITIES,
    META_VERSION,
    SUPPORTED_VERSIONS,
    TASKS_EXTENSION,
    ErrorCode,
    JsonObject,
    RequestId,
    RpcError,
    decode_header_value,
    header_mismatch,
    invalid_params,
)

ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
# Methods whose Mcp-Name the core transport checks, and the param it must equal.
_CORE_NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass(frozen=True)
class Request:
    """A request that passed every envelope and header check."""

    id: RequestId
    method: str
    params: JsonObject
    capabilities: JsonObject
    mcp_name: str | None
    param_headers: tuple[tuple[str, str], ...] = ()  # (lowercased X of Mcp-Param-X, raw value)

    @property
    def has_tasks_capability(self) -> bool:
        extensions = self.capabilities.get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def parse_message(body: bytes) -> JsonObject:
    """Checks 1 and 2: the body is one well-formed JSON-RPC request or notification."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RpcError(ErrorCode.PARSE_ERROR, "Parse error") from exc
    if not isinstance(message, dict):
        raise RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: expected one JSON-RPC object")
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        raise RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request")
    if "id" in message and not _is_request_id(message["id"]):
        raise RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: id must be a string or integer")
    if "params" in message and not isinstance(message["params"], dict):
        raise RpcError(ErrorCode.INVALID_REQUEST, "Invalid Request: params must be an object")
    return message


def is_notification(message: JsonObject) -> bool:
    return "id" not in message


def check_duplicate_headers(headers: Headers) -> None:
    for name in ROUTING_HEADERS:
        if len(headers.get_all(name)) > 1:
            raise header_mismatch(f"{name} header appears more than once")


def check_notification_version(headers: Headers) -> None:
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in SUPPORTED_VERSIONS:
        raise _unsupported_version(version)


def check_request(message: JsonObject, headers: Headers) -> Request:
    """Checks 4 to 8, in the SDK's order; the first failure wins."""
    method: str = message["method"]
    params: JsonObject = message.get("params") or {}
    _refuse_legacy_request(method, params, headers)
    version, capabilities = _check_meta(params)
    _check_version_header(headers, version)
    if headers.get("mcp-method") != method:
        raise header_mismatch("mcp-method header does not match the request body's method")
    mcp_name = _decoded_name(headers)
    _check_core_name(method, params, mcp_name)
    if version not in SUPPORTED_VERSIONS:
        raise _unsupported_version(version)
    param_headers = tuple(headers.with_prefix("mcp-param-"))
    return Request(message["id"], method, params, capabilities, mcp_name, param_headers)


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _refuse_legacy_request(method: str, params: JsonObject, headers: Headers) -> None:
    """A request of an older revision (no envelope: an `initialize` handshake, or a legacy version
    header) gets -32022 naming the version this server speaks, which tells a legacy client (or the
    Inspector's default era) what to do, instead of a puzzling "params._meta is required"."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return
    header = headers.get("mcp-protocol-version")
    if method != "initialize" and (header is None or header in SUPPORTED_VERSIONS):
        return
    offered = params.get("protocolVersion") if method == "initialize" else None
    requested = offered if isinstance(offered, str) else header
    raise RpcError(
        ErrorCode.UNSUPPORTED_VERSION,
        f"Unsupported protocol version: this server speaks only {', '.join(SUPPORTED_VERSIONS)} "
        "(stateless: no initialize handshake, every request carries params._meta)",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested or ""},
    )


def _check_meta(params: JsonObject) -> tuple[str, JsonObject]:
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


def _check_version_header(headers: Headers, version: str) -> None:
    header = headers.get("mcp-protocol-version")
    if header is None:
        raise header_mismatch("mcp-protocol-version header is required")
    if header != version:
        raise header_mismatch("mcp-protocol-version header does not match params._meta")


def _decoded_name(headers: Headers) -> str | None:
    raw = headers.get("mcp-name")
    if raw is None:
        return None
    try:
        return decode_header_value(raw)
    except ValueError as exc:
        raise header_mismatch("mcp-name header is not valid =?base64?…?= text") from exc


def _check_core_name(method: str, params: JsonObject, mcp_name: str | None) -> None:
    param = _CORE_NAME_PARAMS.get(method)
    if param is None:
        return
    expected = params.get(param)
    if not isinstance(expected, str):
        raise invalid_params(f"{method} needs params.{param} (a string)")
    if mcp_name is None:
        raise header_mismatch(f"mcp-name header is required for {method}")
    if mcp_name != expected:
        raise header_mismatch(f"mcp-name header does not match the request body's '{param}'")


def _unsupported_version(requested: str) -> RpcError:
    return RpcError(
        ErrorCode.UNSUPPORTED_VERSION,
        "Unsupported protocol version",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )
