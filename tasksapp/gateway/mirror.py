"""An agent's view of one of its tasks, read from the mirror: the DetailedTask a tasks/get or a
notifications/tasks carries, with the server's policy for who answers applied.

Under `people` the agent never sees the questions: a task waiting for input reads `working`, with
a status message saying a person is answering in the dashboard. Under `either` the agent sees the
questions of the kinds its request declared (a client is never sent a kind it did not declare,
§2.1); the others wait for a person the same way. A question already answered (by anyone) is not
offered again.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from tasksapp.lib import crypto
from tasksapp.mcpclient.wire import InputKinds
from tasksapp.models import Agent, McpServer, RemoteTask

PERSON_ANSWERS = "A person is answering this task's question in the dashboard."
ANSWER_SENT = "The question was answered; waiting for the server to go on."
_OWN_FIELDS = ("resultType", "taskId", "inputRequests", "result", "error")
JsonObject = dict[str, Any]
Question = tuple[str, str, Any]  # (key, method, params) of an open input request


@dataclass(frozen=True)
class MirroredTask:
    """What the gateway needs of one task row, read in one step (the task id decrypted)."""

    pk: int
    task_id: str
    tool: str
    status: str
    expired: bool
    poll_interval_ms: int | None
    last_polled_at: datetime | None
    refresh_wanted_at: datetime | None
    cancel_requested: bool
    policy: str
    described: JsonObject  # the DetailedTask as the server last described it, questions left out
    questions: tuple[Question, ...]

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    def fresh(self, now: datetime) -> bool:
        """Recent enough to answer from: confirmed by the server within its poll interval (plus the
        worker's jitter), and no answer or cancel sent since then. A finished task stays as it is."""
        if self.terminal:
            return True
        if self.refresh_wanted_at is not None or self.last_polled_at is None:
            return False
        return now - self.last_polled_at <= freshness(self.poll_interval_ms)

    def shown(self, kinds: InputKinds) -> list[Question]:
        """The open questions an agent that declared `kinds` is given (none under `people`)."""
        if self.policy == "people":
            return []
        if self.policy == "agent":  # only the agent can answer: hidden, they would wait for no one
            return list(self.questions)
        return [q for q in self.questions if kinds.allows(q[1], q[2])]

    def view(self, kinds: InputKinds) -> JsonObject:
        """The DetailedTask (no resultType) this agent sees: a tasks/get result or a notification's params."""
        if self.status != "input_required":
            return dict(self.described)
        shown = self.shown(kinds)
        if shown:
            asked = {key: {"method": method, "params": params} for key, method, params in shown}
            return {**self.described, "inputRequests": asked}
        waiting = PERSON_ANSWERS if self.questions else ANSWER_SENT
        return {**self.described, "status": "working", "statusMessage": waiting}


def freshness(poll_interval_ms: int | None) -> timedelta:
    """How old a confirmation may be and still count: one poll interval as the worker keeps it."""
    base = (
        settings.MCP_POLL_DEFAULT_MS
        if poll_interval_ms is None
        else max(poll_interval_ms, settings.MCP_POLL_FLOOR_MS)
    )
    return timedelta(milliseconds=base * (1 + settings.MCP_POLL_JITTER) + settings.MCP_GATEWAY_FRESH_SLACK_MS)


def find(*, server: McpServer, agent: Agent, task_id: str) -> MirroredTask | None:
    """The agent's own task of that id on that server; None for any other (unknown, or another's)."""
    task = (
        RemoteTask.objects.filter(server=server, agent=agent, remote_id_hash__in=crypto.fingerprints(task_id))
        .defer("arguments")
        .first()
    )
    return None if task is None else mirrored(task, server, task_id)


def reread(pk: int, server: McpServer, task_id: str) -> MirroredTask:
    return mirrored(RemoteTask.objects.defer("arguments").get(pk=pk), server, task_id)


def mirrored(task: RemoteTask, server: McpServer, task_id: str) -> MirroredTask:
    questions: tuple[Question, ...] = ()
    if task.status == "input_required":
        rows = task.input_requests.filter(state="open").values_list("key_encrypted", "method", "params")
        questions = tuple((crypto.decrypt(key), method, params) for key, method, params in rows)
    return MirroredTask(
        pk=task.pk,
        task_id=task_id,
        tool=task.tool_name,
        status=task.status,
        expired=task.expired,
        poll_interval_ms=task.poll_interval_ms,
        last_polled_at=task.last_polled_at,
        refresh_wanted_at=task.refresh_wanted_at,
        cancel_requested=task.cancel_requested_at is not None,
        policy=server.input_policy(task.tool_name),
        described=described(task, task_id),
        questions=questions,
    )


def described(task: RemoteTask, task_id: str) -> JsonObject:
    """The task as the server last described it, as a DetailedTask (no resultType, no inputRequests)."""
    out: JsonObject = {k: v for k, v in (task.raw or {}).items() if k not in _OWN_FIELDS}
    out.update(
        taskId=task_id,
        status=task.status,
        createdAt=task.created_at_raw,
        lastUpdatedAt=task.updated_at_raw,
        ttlMs=task.ttl_ms,
    )
    _optional(out, "statusMessage", task.status_message or None)
    _optional(out, "pollIntervalMs", task.poll_interval_ms)
    if task.status == "completed":
        out["result"] = task.result if isinstance(task.result, dict) else {"content": []}
    elif task.status == "failed":
        out["error"] = task.error if isinstance(task.error, dict) else {"code": -32603, "message": "failed"}
    return out


def _optional(out: JsonObject, key: str, value: Any) -> None:
    if value is None:
        out.pop(key, None)
    else:
        out[key] = value
