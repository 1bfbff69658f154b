"""Pure MCP protocol code: an async client for the tasks extension (SEP-2663) at 2026-07-28.

Nothing here imports Django (a test enforces it); configuration comes in as arguments.
"""

from tasksapp.mcpclient.client import DEFAULT_CLIENT_INFO, McpClient, Timeouts, default_transport
from tasksapp.mcpclient.errors import (
    InvalidResponse,
    ListenUnsupported,
    McpError,
    ProtocolError,
    StreamDropped,
    TransportError,
)
from tasksapp.mcpclient.types import (
    TERMINAL_STATUSES,
    CallOutcome,
    CancelledTask,
    CompletedTask,
    DetailedTask,
    Discovery,
    FailedTask,
    InputRequest,
    InputRequired,
    InputRequiredTask,
    ListenAck,
    ListenEnded,
    ListenEvent,
    RpcErrorInfo,
    Task,
    TaskCreated,
    Tool,
    ToolResult,
    WorkingTask,
    parse_detailed_task,
)
from tasksapp.mcpclient.wire import ALL_INPUT_KINDS, PROTOCOL_VERSION, TASKS_EXTENSION, InputKinds

__all__ = [
    "ALL_INPUT_KINDS",
    "DEFAULT_CLIENT_INFO",
    "PROTOCOL_VERSION",
    "TASKS_EXTENSION",
    "TERMINAL_STATUSES",
    "CallOutcome",
    "CancelledTask",
    "CompletedTask",
    "DetailedTask",
    "Discovery",
    "FailedTask",
    "InputKinds",
    "InputRequest",
    "InputRequired",
    "InputRequiredTask",
    "InvalidResponse",
    "ListenAck",
    "ListenEnded",
    "ListenEvent",
    "ListenUnsupported",
    "McpClient",
    "McpError",
    "ProtocolError",
    "RpcErrorInfo",
    "StreamDropped",
    "Task",
    "TaskCreated",
    "Timeouts",
    "Tool",
    "ToolResult",
    "TransportError",
    "WorkingTask",
    "default_transport",
    "parse_detailed_task",
]
