"""A reference SEP-2663 MCP server (pure ASGI, no Django, no mcp SDK) for tests and demos."""

from .app import DemoServerApp
from .server import RunningServer, create_app, run_in_thread

__all__ = ["DemoServerApp", "RunningServer", "create_app", "run_in_thread"]
