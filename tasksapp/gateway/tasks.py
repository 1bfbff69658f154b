"""tasks/get, tasks/update and tasks/cancel for an agent's own tasks, served from the mirror.

tasks/get answers from the mirror while it is fresh (mirror.MirroredTask.fresh); otherwise one
request asks the server (one per task at a time in this process, and one per freshness window
across processes, claimed in the database), the answer goes into the mirror like any poll, and
the agent is answered from the mirror. So any number of agents and open pages cost the server one
poller. tasks/update and tasks/cancel go upstream once: the first answer to a key wins, whoever
gives it; a later one is acknowledged and dropped, as the spec has servers do with keys that are
no longer outstanding.
"""

import asyncio
import logging
from typing import Any

from django.utils import timezone

from tasksapp.gateway.auth import Caller
from tasksapp.gateway.cache import KeptTask, Tasks
from tasksapp.gateway.envelope import Call
from tasksapp.gateway.errors import (
    UPSTREAM_FAILED,
    GatewayError,
    header_mismatch,
    invalid_params,
    missing_tasks_capability,
    unknown_task,
)
from tasksapp.gateway.http import dump
from tasksapp.gateway.mirror import MirroredTask, find, freshness, reread
from tasksapp.gateway.upstream import Upstreams
from tasksapp.lib.connections import db_step
from tasksapp.mcpclient import McpError, ProtocolError
from tasksapp.services import gateway as record

log = logging.getLogger(__name__)
JsonObject = dict[str, Any]
ACK: JsonObject = {"resultType": "complete"}


class TaskMethods:
    def __init__(self, upstreams: Upstreams) -> None:
        self.upstreams = upstreams
        self._reading: dict[int, asyncio.Future[None]] = {}  # task pk -> the read-through in flight
        self.kept = Tasks()

    async def handle(self, caller: Caller, call: Call) -> bytes:
        """The result of a tasks/* call, rendered, or GatewayError."""
        if not call.declares_tasks:
            raise missing_tasks_capability(call.method)
        task_id = call.params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise invalid_params(f"{call.method} needs params.taskId (a string)")
        if call.mcp_name is not None and call.mcp_name != task_id:
            raise header_mismatch("mcp-name header does not match the request body's 'taskId' parameter")
        if call.method == "tasks/get":
            return await self._get(caller, task_id, call)
        task = await self._find(caller, task_id)
        try:
            if call.method == "tasks/update":
                return dump(await self._update(caller, task, call))
            return dump(await self._cancel(caller, task))
        finally:
            self.kept.drop(task.pk)

    async def _find(self, caller: Caller, task_id: str) -> MirroredTask:
        task = await db_step(find)(server=caller.server, agent=caller.agent, task_id=task_id)
        if task is None or task.expired:
            raise unknown_task()
        return task

    # --- tasks/get ------------------------------------------------------------------------

    async def _get(self, caller: Caller, task_id: str, call: Call) -> bytes:
        """From what this process kept while it is fresh; else from the mirror, read through to
        the server when the mirror is older than the task's poll interval."""
        key = (caller.server.pk, caller.agent.pk, task_id)
        kept = self.kept.get(key, timezone.now())
        if kept is None:
            generation = self.kept.generation()
            task = await self._find(caller, task_id)
            if not task.fresh(timezone.now()):
                task = await self.refreshed(caller, task)
                if task.expired:
                    raise unknown_task()
            kept = KeptTask(task)
            await self.kept.put(key, kept, generation, timezone.now())
        rendered = kept.rendered.get(call.input_kinds)
        if rendered is None:
            view = kept.task.view(call.input_kinds)
            rendered = kept.rendered[call.input_kinds] = dump({"resultType": "complete", **view})
        return rendered

    async def refreshed(self, caller: Caller, task: MirroredTask) -> MirroredTask:
        """The task as the mirror holds it after asking the server (once, however many ask at once)."""
        running = self._reading.get(task.pk)
        if running is None:
            running = self._reading[task.pk] = asyncio.ensure_future(self._ask(caller, task))
            running.add_done_callback(lambda _: self._reading.pop(task.pk, None))
        await asyncio.shield(running)
        return await db_step(reread)(task.pk, caller.server, task.task_id)

    async def _ask(self, caller: Caller, task: MirroredTask) -> None:
        """One tasks/get upstream, into the mirror; another process that just asked makes it unneeded.
        A server that cannot be reached leaves the mirror as it is: the agent gets what it holds."""
        now = timezone.now()
        if task.refresh_wanted_at is None:
            claimed = await db_step(record.gateway_claim_poll)(
                task_id=task.pk, older_than=now - freshness(task.poll_interval_ms), now=now
            )
            if not claimed:
                return
        try:
            async with self.upstreams.client(caller.server) as client:
                snapshot = await client.get_task(task.task_id)
        except ProtocolError as exc:
            if exc.is_not_found:
                await db_step(record.gateway_expire)(task_id=task.pk)
            else:
                log.warning("gateway: tasks/get of task #%s on %s: %s", task.pk, caller.server.name, exc)
            return
        except McpError as exc:
            log.warning("gateway: tasks/get of task #%s on %s failed: %s", task.pk, caller.server.name, exc)
            return
        await db_step(record.gateway_apply_poll)(task_id=task.pk, snapshot=snapshot, asked_at=now)

    # --- tasks/update and tasks/cancel ------------------------------------------------------

    async def _update(self, caller: Caller, task: MirroredTask, call: Call) -> JsonObject:
        responses = call.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise invalid_params("tasks/update needs params.inputResponses (an object)")
        if task.policy == "people" or task.terminal:
            return ACK  # people answer this tool's questions: the agent's answers are not outstanding
        row = await db_step(_row)(task.pk)
        kinds = call.input_kinds if task.policy == "either" else None  # questions it was never shown: dropped
        claimed = await db_step(record.gateway_claim_answers)(
            task=row, agent=caller.agent, responses=responses, kinds=kinds
        )
        if not claimed:
            return ACK
        try:
            async with self.upstreams.client(caller.server) as client:
                await client.update_task(task.task_id, claimed)
        except McpError as exc:
            await db_step(record.gateway_answers_failed)(
                task=row, agent=caller.agent, keys=list(claimed), error=str(exc)
            )
            raise _relayed(exc, caller.server.name) from None
        await db_step(record.gateway_answers_sent)(task=row, agent=caller.agent, keys=list(claimed))
        return ACK

    async def _cancel(self, caller: Caller, task: MirroredTask) -> JsonObject:
        row = await db_step(_row)(task.pk)
        if task.terminal or not await db_step(record.gateway_claim_cancel)(task=row, agent=caller.agent):
            return ACK  # finished, or a cancel was asked for already: it is not sent twice
        try:
            async with self.upstreams.client(caller.server) as client:
                await client.cancel_task(task.task_id)
        except McpError as exc:
            await db_step(record.gateway_cancel_failed)(task=row, agent=caller.agent, error=str(exc))
            raise _relayed(exc, caller.server.name) from None
        await db_step(record.gateway_cancel_sent)(task=row, agent=caller.agent)
        return ACK


def _row(pk: int) -> Any:
    from tasksapp.models import RemoteTask

    return RemoteTask.objects.only("id", "server_id", "status", "status_message").get(pk=pk)


def _relayed(exc: McpError, name: str) -> GatewayError:
    """The upstream's refusal as the agent's error: a JSON-RPC error as it was sent, else a 502."""
    if isinstance(exc, ProtocolError):
        return GatewayError(exc.status or 400, exc.code, exc.message, exc.data)
    return GatewayError(502, UPSTREAM_FAILED, f"The gateway could not reach {name}: {exc}")
