"""The gateway's ASGI application: `/gateway/<server id>/mcp`, Streamable HTTP at 2026-07-28.

Each request passes, in order: the Host and Origin checks (DNS rebinding), the agent's token (401),
the server's place in the agent's scope (404), the agent's rate limit (429), the body cap (413),
the JSON-RPC and header checks a server makes (400), and is then served: tasks/* from the mirror,
subscriptions/listen from the mirror's changes, everything else by the upstream server, reached
with the dashboard's own credentials (the agent's token never leaves the gateway).
"""

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from tasksapp.gateway.auth import Authenticator, Caller, RateLimiter, no_such_server, refuse_token_in_url
from tasksapp.gateway.envelope import Call, check_call, check_duplicates, check_notification, parse_message
from tasksapp.gateway.errors import GatewayError, internal, invalid_request, method_not_found
from tasksapp.gateway.forward import forward
from tasksapp.gateway.hosts import check_host_and_origin
from tasksapp.gateway.http import (
    BadContentLength,
    BodyTooLarge,
    Headers,
    Receive,
    Scope,
    Send,
    read_body,
    send_bytes,
    send_json,
    send_result,
)
from tasksapp.gateway.listen import Listens
from tasksapp.gateway.params import ParamHeaders
from tasksapp.gateway.tasks import TaskMethods
from tasksapp.gateway.traffic import TrafficCounter
from tasksapp.gateway.upstream import Upstreams
from tasksapp.lib import crypto
from tasksapp.mcpclient.wire import TASK_METHODS

log = logging.getLogger(__name__)
PREFIX = "/gateway/"
_PATH = re.compile(r"^/gateway/(?P<server>[0-9]{1,18})/mcp$")
ALLOW = [(b"allow", b"POST")]


class GatewayApp:
    """One per process: its upstream clients, rate limits and read-throughs are the process's."""

    def __init__(self) -> None:
        self.upstreams = Upstreams()
        self.authenticate = Authenticator()
        self.limiter = RateLimiter()
        self.tasks = TaskMethods(self.upstreams)
        self.params = ParamHeaders()
        self.listens = Listens(self.tasks, self.authenticate)
        self.traffic = TrafficCounter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started, seen = time.monotonic(), Seen()
        try:
            await self._serve(scope, receive, send, seen)
        except GatewayError as exc:
            seen.error = True
            await send_json(send, exc.status, exc.body(), exc.headers)
        except crypto.SecretUnreadable:
            seen.error = True
            log.error("gateway: a stored secret cannot be decrypted (%s)", scope.get("path"))
            await send_json(send, 500, internal(crypto.UNREADABLE).body())
        finally:
            if seen.caller is not None:
                ms = None if seen.method == "subscriptions/listen" else (time.monotonic() - started) * 1000
                self.traffic.record(
                    server=seen.caller.server.pk,
                    agent=seen.caller.agent.pk,
                    method=seen.method,
                    tool=seen.tool,
                    ms=ms,
                    error=seen.error,
                )

    async def _serve(self, scope: Scope, receive: Receive, send: Send, seen: "Seen") -> None:
        headers = Headers(scope["headers"])
        check_host_and_origin(scope, headers)
        refuse_token_in_url(scope)
        match = _PATH.match(scope["path"])
        if match is None:
            raise no_such_server()
        caller = seen.caller = await self.authenticate(headers, int(match["server"]))
        if scope["method"] != "POST":
            raise GatewayError(405, -32600, "Method not allowed: POST one JSON-RPC message", headers=ALLOW)
        self.limiter.take(caller.agent)
        _check_media(headers)
        try:
            body = await read_body(receive, headers, settings.MCP_GATEWAY_MAX_BODY_BYTES)
        except BodyTooLarge:
            limit = settings.MCP_GATEWAY_MAX_BODY_BYTES
            raise GatewayError(413, -32600, f"Request body too large: at most {limit} bytes") from None
        except BadContentLength:
            raise invalid_request("Invalid Content-Length: send the body's length in ASCII digits") from None
        message = parse_message(body)
        if "id" not in message:
            check_notification(headers)
            await send_bytes(send, 202)  # no client notification is defined at 2026-07-28: nothing to do
            return
        request_id = message["id"]
        seen.method = str(message["method"])[:60]
        params = message.get("params") or {}
        seen.tool = str(params.get("name", ""))[:200] if seen.method == "tools/call" else ""
        try:
            check_duplicates(headers)
            call = check_call(message, headers)
            seen.error = await self._dispatch(caller, call, receive, send)
        except GatewayError as exc:
            exc.request_id = request_id
            raise

    async def _dispatch(self, caller: Caller, call: Call, receive: Receive, send: Send) -> bool:
        """Serve the call; True when the answer was an error (for the traffic figures)."""
        if not caller.server.enabled:
            raise GatewayError(503, -32603, f"{caller.server.name} is disabled by an administrator")
        if call.method in TASK_METHODS:
            await send_result(send, call.id, await self.tasks.handle(caller, call))
        elif call.method == "subscriptions/listen":
            await self.listens.serve(caller, call, receive, send)
        elif call.method in ("tasks/result", "tasks/list"):
            raise method_not_found(call.method)
        else:
            return await forward(self.upstreams, self.params, caller, call, send) == "error"
        return False


def _check_media(headers: Headers) -> None:
    accept = (headers.get("accept") or "").lower()
    if "application/json" not in accept or "text/event-stream" not in accept:
        raise GatewayError(
            406, -32600, "Not Acceptable: Accept must list application/json and text/event-stream"
        )
    content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise invalid_request("Content-Type must be application/json")


@dataclass
class Seen:
    """What the traffic figures count of a request, learnt as it is served."""

    caller: Caller | None = None
    method: str = ""
    tool: str = ""
    error: bool = False


class GatewayRouter:
    """ASGI: HTTP requests under /gateway/ go to the gateway, everything else to `fallback`."""

    def __init__(self, gateway: Any, fallback: Any) -> None:
        self.gateway, self.fallback = gateway, fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await self.gateway(scope, receive, send)
        else:
            await self.fallback(scope, receive, send)
