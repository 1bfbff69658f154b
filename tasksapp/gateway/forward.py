"""Every method but tasks/* and subscriptions/listen goes upstream, and its answer comes back as
the upstream sent it: JSON or SSE, errors included. A tools/call answered with a task is mirrored
first, attributed to the agent, so the agent can ask the gateway about it at once.
"""

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tasksapp.gateway.auth import Caller
from tasksapp.gateway.envelope import Call
from tasksapp.gateway.errors import UPSTREAM_FAILED, GatewayError, internal
from tasksapp.gateway.http import Send, SseResponse, send_bytes
from tasksapp.gateway.params import ParamHeaders
from tasksapp.gateway.upstream import Upstreams, upstream_capabilities
from tasksapp.lib.connections import CANNOT_WRITE, db_step
from tasksapp.mcpclient import InputRequired, InvalidResponse, McpError, TaskCreated, TransportError
from tasksapp.mcpclient.oauth import AuthorizationRequired
from tasksapp.mcpclient.relay import Relayed
from tasksapp.mcpclient.types import parse_call_outcome
from tasksapp.services import CallFailed, oauth_mark_needed
from tasksapp.services.gateway import gateway_call_record, gateway_task_create

log = logging.getLogger(__name__)
JsonObject = dict[str, Any]
AuditAfter = Callable[[], Awaitable[None]] | None
# Upstream answers passed on with their status; credentials refused upstream are the dashboard's
# business, never the agent's (its challenge would send the agent to the upstream's OAuth).
_REFUSED = (401, 403)


async def forward(upstreams: Upstreams, params: ParamHeaders, caller: Caller, call: Call, send: Send) -> str:
    """Relay one call; returns the outcome for the traffic figures ("ok" or "error")."""
    server = caller.server
    tool = str(call.params.get("name", "")) if call.method == "tools/call" else ""
    people = server.input_policy(tool) != "agent"
    capabilities = upstream_capabilities(call.capabilities, people_answer=people)
    extra = {f"Mcp-Param-{name}": value for name, value in call.param_headers}
    if call.method == "tools/call":
        extra = await params.for_call(server, tool, call.params.get("arguments"), call.param_headers)
    stream = SseResponse(send)
    request_id: int | str = 0 if call.id is None else call.id  # a Call is a request: never None
    try:
        async with upstreams.client(server) as client:
            async with asyncio.timeout(client.relay_deadline(call.method)):
                relayed = await client.relay(
                    call.method, request_id, call.params, capabilities=capabilities, extra_headers=extra
                )
                try:
                    return await _pass_on(relayed, caller, call, send, stream)
                finally:
                    await relayed.aclose()
    except TimeoutError:
        late = GatewayError(504, UPSTREAM_FAILED, f"{server.name} did not answer in time", request_id=call.id)
        if not stream.opened:
            raise late from None
        # The agent's stream is open (its headers went out): the answer ends it, as an error.
        await stream.message(late.body())
        await stream.close()
        return "error"
    except AuthorizationRequired as exc:
        await db_step(oauth_mark_needed)(server_id=server.pk, exc=exc)
        raise _unreachable(server.name, "it needs authorization: an admin must connect it") from None
    except TransportError as exc:
        raise _unreachable(server.name, str(exc)) from None


def _unreachable(name: str, why: str) -> GatewayError:
    return GatewayError(502, UPSTREAM_FAILED, f"The gateway could not reach {name}: {why}")


async def _pass_on(relayed: Relayed, caller: Caller, call: Call, send: Send, stream: SseResponse) -> str:
    if relayed.status in _REFUSED:
        raise _unreachable(
            caller.server.name, f"it refused the dashboard's credentials (HTTP {relayed.status})"
        )
    if relayed.kind == "sse":
        return await _pass_on_stream(relayed, caller, call, stream)
    body = await relayed.body()
    message = await relayed.json() if relayed.kind == "json" else None
    outcome = "error" if relayed.status >= 400 or _is_error(message) else "ok"
    after = (
        await _settle_call(caller, call, message)
        if isinstance(message, dict) and call.method == "tools/call"
        else None
    )
    content_type = relayed.content_type.encode("latin-1") or None
    extra = [(b"retry-after", str(int(relayed.retry_after)).encode())] if relayed.retry_after else []
    await send_bytes(send, relayed.status, body, content_type, extra)
    if after is not None:
        await after()
    return outcome


async def _pass_on_stream(relayed: Relayed, caller: Caller, call: Call, stream: SseResponse) -> str:
    await stream.open(relayed.status)
    outcome, after = "error", None
    try:
        async for message in relayed.messages():
            final = message.get("id") == call.id and ("result" in message or "error" in message)
            if final and call.method == "tools/call":
                try:
                    after = await _settle_call(caller, call, message)
                except GatewayError as exc:
                    exc.request_id = call.id
                    message = exc.body()
            await stream.message(message)
            if final:
                outcome = "error" if _is_error(message) else "ok"
                break
    except McpError as exc:
        # Headers are sent: the stream ends with an error for the request (what the upstream did
        # with it is unknown; a task it may have started is not in the mirror).
        log.warning("gateway: relaying %s from %s broke off: %s", call.method, caller.server.name, exc)
        if outcome == "error" and after is None:
            broken = _unreachable(caller.server.name, str(exc))
            broken.request_id = call.id
            await stream.message(broken.body())
    await stream.close()
    if after is not None:
        await after()
    return outcome


def _is_error(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("error"), dict)


async def _settle_call(caller: Caller, call: Call, message: JsonObject) -> AuditAfter:
    """Before the agent hears the answer, a task goes into the mirror. Any other outcome is audited
    right after the answer went out (returned, to be awaited then): the agent waits for no write."""
    tool, arguments = str(call.params.get("name")), call.params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}

    def audit_after(outcome: str, error: str = "") -> AuditAfter:
        return functools.partial(
            db_step(gateway_call_record),
            server=caller.server,
            agent=caller.agent,
            tool=tool,
            outcome=outcome,
            error=error,
        )

    if _is_error(message):
        return audit_after("error", str(message["error"].get("message", ""))[:500] or "error")
    try:
        outcome = parse_call_outcome(message.get("result"))
    except InvalidResponse as exc:
        return audit_after("error", str(exc))
    if not isinstance(outcome, TaskCreated):
        return audit_after("input_required" if isinstance(outcome, InputRequired) else "result")
    try:
        await db_step(gateway_task_create)(
            server=caller.server, agent=caller.agent, snapshot=outcome.task, tool=tool, arguments=arguments
        )
    except CallFailed as exc:
        raise internal(str(exc)) from None
    except CANNOT_WRITE as exc:
        log.error(
            "gateway: task %s (%s on %s) was started but not recorded: %s",
            outcome.task.task_id,
            tool,
            caller.server.name,
            exc,
        )
        raise internal(
            f"{caller.server.name} started task {outcome.task.task_id}, but the dashboard's database is "
            "unreachable, so it could not be recorded; ask an operator to adopt it "
            "(manage.py tasks adopt). Do not call the tool again."
        ) from None
    return None
