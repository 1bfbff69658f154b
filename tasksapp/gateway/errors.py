"""What the gateway refuses, as HTTP status plus JSON-RPC error: one exception, answered in one place."""

from typing import Any

from tasksapp.mcpclient.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
)
from tasksapp.mcpclient.wire import PROTOCOL_VERSION, TASKS_EXTENSION

# Implementation-defined codes (-32000 to -32019 belong to implementations, §8.4), clear of the
# pre-release numbers -32001, -32003 and -32004 that clients may still recognise.
UNAUTHORIZED = -32010
NOT_FOUND = -32011
RATE_LIMITED = -32012
UPSTREAM_FAILED = -32013

RequestId = str | int | None


class GatewayError(Exception):
    """A refusal: `status` is the HTTP status, `code`/`message`/`data` the JSON-RPC error."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        data: Any = None,
        *,
        headers: list[tuple[bytes, bytes]] | None = None,
        request_id: RequestId = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.data = status, code, message, data
        self.headers = headers or []
        self.request_id = request_id

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.request_id, "error": error}


def parse_error(message: str = "Parse error") -> GatewayError:
    return GatewayError(400, PARSE_ERROR, message)


def invalid_request(message: str) -> GatewayError:
    return GatewayError(400, INVALID_REQUEST, message)


def invalid_params(message: str) -> GatewayError:
    return GatewayError(400, INVALID_PARAMS, message)


def header_mismatch(message: str) -> GatewayError:
    return GatewayError(400, HEADER_MISMATCH, message)


def method_not_found(method: str) -> GatewayError:
    return GatewayError(404, METHOD_NOT_FOUND, f"Method not found: {method[:100]}")


def unknown_task() -> GatewayError:
    """Unknown, expired, or another's: one answer for all three, so nothing can be probed."""
    return GatewayError(400, INVALID_PARAMS, "Task not found")


def missing_tasks_capability(what: str) -> GatewayError:
    return GatewayError(
        400,
        MISSING_CAPABILITY,
        f"{what} needs the tasks extension ({TASKS_EXTENSION}); "
        "the client did not declare it for this request",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def unsupported_version(requested: str) -> GatewayError:
    return GatewayError(
        400,
        UNSUPPORTED_VERSION,
        f"Unsupported protocol version: this gateway speaks only {PROTOCOL_VERSION} (stateless: no "
        "initialize handshake, every request carries params._meta)",
        {"supported": [PROTOCOL_VERSION], "requested": requested},
    )


def internal(message: str) -> GatewayError:
    return GatewayError(500, INTERNAL_ERROR, message)
