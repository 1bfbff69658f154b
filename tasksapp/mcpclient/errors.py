"""The client's error hierarchy: what went wrong, in terms a caller can act on.

McpError
├── TransportError          the exchange itself failed (network, HTTP, a response that breaks the protocol)
│   ├── InvalidResponse     the server answered, but with something this client must not trust
│   └── StreamDropped       an SSE stream ended before it should have
├── ProtocolError           the server answered with a JSON-RPC error (code, message, data)
├── ListenUnsupported       the server has no subscriptions/listen (404 or -32601)
"""

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
MISSING_CAPABILITY_DRAFT = -32003
UNSUPPORTED_VERSION = -32022

_CODE_NAMES = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    HEADER_MISMATCH: "header mismatch",
    MISSING_CAPABILITY: "missing client capability",
    MISSING_CAPABILITY_DRAFT: "missing client capability",
    UNSUPPORTED_VERSION: "unsupported protocol version",
}


class McpError(Exception):
    """Anything this client raises."""


class TransportError(McpError):
    """The request did not produce a usable JSON-RPC answer.

    `permanent` is True when retrying the same request cannot help (a wrong URL, refused
    credentials, a response that breaks the protocol in a way a retry will repeat).
    `retry_after` carries the server's Retry-After in seconds when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.status = status
        self.retry_after = retry_after


class InvalidResponse(TransportError):
    """The server's answer is malformed: bad JSON, wrong types, missing fields, too large."""


class StreamDropped(TransportError):
    """An SSE stream closed without the final message the protocol promises."""


class ListenUnsupported(McpError):
    """The server does not implement subscriptions/listen; poll instead."""


class InvalidHeaderAnnotation(McpError):
    """A tool's x-mcp-header annotations break the rules of §2.4; nothing was sent."""


class ProtocolError(McpError):
    """A JSON-RPC error object from the server."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None) -> None:
        name = _CODE_NAMES.get(code)
        label = f"{code} {name}" if name else str(code)
        super().__init__(f"JSON-RPC error {label}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.status = status

    @property
    def is_missing_capability(self) -> bool:
        """-32021, its draft number -32003, or any error naming requiredCapabilities."""
        if self.code in (MISSING_CAPABILITY, MISSING_CAPABILITY_DRAFT):
            return True
        return isinstance(self.data, dict) and isinstance(self.data.get("requiredCapabilities"), dict)

    @property
    def is_not_found(self) -> bool:
        """-32602 on a task method: the task is unknown, expired, or not ours."""
        return self.code == INVALID_PARAMS

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            body["data"] = self.data
        return body
