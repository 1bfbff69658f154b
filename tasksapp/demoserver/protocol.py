"""Wire constants, JSON-RPC errors and envelopes, SSE framing for the demo server."""

from __future__ import annotations

import base64
import binascii
import json
from enum import IntEnum
from typing import Any

JsonObject = dict[str, Any]
RequestId = str | int

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO: JsonObject = {"name": "mcp-tasks-demoserver", "version": "1.0.0"}

_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    HEADER_MISMATCH = -32020
    MISSING_CAPABILITY = -32021
    UNSUPPORTED_VERSION = -32022


# Statuses follow the SDK (PROTOCOL.md §10 #21): errors without a mapping answer 200.
_HTTP_STATUS: dict[int, int] = {
    ErrorCode.PARSE_ERROR: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_PARAMS: 400,
    ErrorCode.HEADER_MISMATCH: 400,
    ErrorCode.MISSING_CAPABILITY: 400,
    ErrorCode.UNSUPPORTED_VERSION: 400,
    ErrorCode.METHOD_NOT_FOUND: 404,
}


class RpcError(Exception):
    """A JSON-RPC error to send back as the answer to the current request."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS.get(self.code, 200)


def invalid_params(message: str, data: Any = None) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, message, data)


def header_mismatch(message: str) -> RpcError:
    return RpcError(ErrorCode.HEADER_MISMATCH, message)


def missing_tasks_capability(message: str) -> RpcError:
    return RpcError(
        ErrorCode.MISSING_CAPABILITY,
        message,
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def missing_client_capability(message: str, required: JsonObject) -> RpcError:
    """-32021 with `data.requiredCapabilities`, a ClientCapabilities object as the schema defines it."""
    return RpcError(ErrorCode.MISSING_CAPABILITY, message, {"requiredCapabilities": required})


def task_not_found(task_id: str) -> RpcError:
    return invalid_params(f"Task {task_id} not found")


def with_server_info(result: JsonObject) -> JsonObject:
    meta = dict(result.get("_meta") or {})
    meta[META_SERVER_INFO] = SERVER_INFO
    return {**result, "_meta": meta}


def result_message(request_id: RequestId | None, result: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "result": with_server_info(result)}


def error_message(request_id: RequestId | None, error: RpcError) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}


def notification(method: str, params: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def dump_json(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# CRLF line endings, as the SDK writes them, so clients meet the harder case.
SSE_PING = b": ping\r\n\r\n"


def sse_event(message: Any) -> bytes:
    return b"event: message\r\ndata: " + dump_json(message) + b"\r\n\r\n"


def decode_header_value(raw: str) -> str:
    """Undo the `=?base64?…?=` wrapping of §2.3; raises ValueError on bad Base64."""
    if not (raw.startswith(_SENTINEL_PREFIX) and raw.endswith(_SENTINEL_SUFFIX)):
        return raw
    inner = raw[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
    try:
        return base64.b64decode(inner, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"undecodable base64 header value: {raw!r}") from exc
