"""The `Mcp-Param-*` headers (§2.4) a forwarded tools/call carries, from the tool's stored inputSchema.

Checked as a server checks them (the gateway is one to its agents): a header the schema asks for
that is missing, or that contradicts the arguments, gets -32020. The upstream gets the headers
made from the arguments. Headers the stored schema does not define (a tool unknown here, or whose
annotation is invalid) go on as the agent sent them: the upstream judges them.
"""

from typing import Any

from tasksapp.gateway.envelope import decode_header_value
from tasksapp.gateway.errors import header_mismatch
from tasksapp.lib.connections import db_step
from tasksapp.mcpclient.errors import InvalidHeaderAnnotation
from tasksapp.mcpclient.wire import param_header_names, param_header_values
from tasksapp.models import McpServer

Names = dict[str, str] | None  # argument -> X of Mcp-Param-X; None: unknown tool or invalid annotation


class ParamHeaders:
    """Per process: each server's tools' header names, read once per discovery of the server."""

    def __init__(self) -> None:
        self._tools: dict[int, tuple[object, dict[str, Names]]] = {}

    async def for_call(
        self, server: McpServer, tool: str, arguments: Any, sent: tuple[tuple[str, str], ...]
    ) -> dict[str, str]:
        """The Mcp-Param-* headers to send upstream; GatewayError -32020 for a contradicting one."""
        names = (await self._names(server)).get(tool)
        given = {name.lower(): value for name, value in sent}
        if names is None:
            return {f"Mcp-Param-{name}": value for name, value in sent}
        made = param_header_values(names, arguments if isinstance(arguments, dict) else {})
        for header, value in made.items():
            mine = given.pop(header.removeprefix("Mcp-Param-").lower(), None)
            if mine is None:
                raise header_mismatch(f"{header} header is required (the tool's x-mcp-header)")
            if decode_header_value(mine) != decode_header_value(value):
                raise header_mismatch(f"{header} header does not match the request body's arguments")
        return {**made, **{f"Mcp-Param-{name}": value for name, value in given.items()}}

    async def _names(self, server: McpServer) -> dict[str, Names]:
        version = (server.discovered_at, server.era)
        known = self._tools.get(server.pk)
        if known is None or known[0] != version:
            known = self._tools[server.pk] = (version, await db_step(_read)(server.pk))
        return known[1]


def _read(server_id: int) -> dict[str, Names]:
    tools = McpServer.objects.filter(pk=server_id).values_list("tools", flat=True).first() or []
    found: dict[str, Names] = {}
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        schema = tool.get("inputSchema")
        try:
            found[tool["name"]] = param_header_names(schema if isinstance(schema, dict) else {})
        except InvalidHeaderAnnotation:
            found[tool["name"]] = None
    return found
