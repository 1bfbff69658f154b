"""What the gateway writes: tasks agents start, their answers and cancels, and the mirror's freshness.

The gateway does its network I/O outside these (never while a transaction is open): claim, send,
then record. Every write names the agent, in the row and in the audit log.
"""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from tasksapp import events
from tasksapp.lib import crypto
from tasksapp.mcpclient import DetailedTask
from tasksapp.mcpclient.wire import InputKinds
from tasksapp.models import Agent, InputRequest, McpServer, RemoteTask
from tasksapp.services.audit import audit
from tasksapp.services.errors import CallFailed
from tasksapp.services.inputs import ACTION_VERBS, AUDITED_ACTIONS
from tasksapp.services.tasks import task_apply_snapshot, task_create, task_mark_expired, task_note


def gateway_task_create(
    *, server: McpServer, agent: Agent, snapshot: DetailedTask, tool: str, arguments: dict[str, Any]
) -> RemoteTask:
    """Mirror a task an agent's tools/call created, before the agent hears of it. A task id the
    server already gave another task is refused (CallFailed) and audited; the first task is kept."""
    try:
        with transaction.atomic():
            task = task_create(
                server=server, snapshot=snapshot, tool_name=tool, arguments=arguments, user=None, agent=agent
            )
            RemoteTask.objects.filter(pk=task.pk).update(last_polled_at=timezone.now())
            detail = {"tool": tool, "outcome": "task", "via": "gateway"}
            audit(None, "start", task=task, agent=agent, detail=detail)
    except IntegrityError:
        message = (
            f"{server.name} answered this call with a task id it had already given to another task; "
            "the call was not recorded as a new task. The server is reusing task ids."
        )
        gateway_call_record(server=server, agent=agent, tool=tool, outcome="error", error=message)
        raise CallFailed(message) from None
    return task


def gateway_call_record(*, server: McpServer, agent: Agent, tool: str, outcome: str, error: str = "") -> None:
    """Audit an agent's tools/call that made no task: a result, an input round, or a failure."""
    detail = {"tool": tool, "outcome": outcome, "via": "gateway", **({"error": error} if error else {})}
    audit(None, "start", server=server, agent=agent, ok=not error, detail=detail)


def gateway_claim_poll(*, task_id: int, older_than: datetime, now: datetime) -> bool:
    """Claim the next read-through of a task for this process: True when no one confirmed the task
    since `older_than` (nor is asking the server about it right now)."""
    claimed = (
        RemoteTask.objects.filter(pk=task_id)
        .exclude(last_polled_at__gte=older_than)
        .update(last_polled_at=now)
    )
    return bool(claimed)


def gateway_apply_poll(*, task_id: int, snapshot: DetailedTask, asked_at: datetime) -> bool:
    """A read-through's answer: into the mirror like any poll; an answer or cancel sent before the
    question was asked is now confirmed (or not: the snapshot says)."""
    changed = task_apply_snapshot(task=RemoteTask(pk=task_id), snapshot=snapshot, source="poll")
    RemoteTask.objects.filter(pk=task_id, refresh_wanted_at__lte=asked_at).update(refresh_wanted_at=None)
    return changed


def gateway_expire(*, task_id: int) -> None:
    task_mark_expired(task=RemoteTask(pk=task_id), reason="the server no longer knows this task (-32602)")


def gateway_claim_answers(
    *, task: RemoteTask, agent: Agent, responses: dict[str, Any], kinds: InputKinds | None = None
) -> dict[str, Any]:
    """Of an agent's answers, the ones it is first to give: their rows move open -> sending in one
    conditional UPDATE each, so a person answering the same key at the same moment sends nothing,
    or the agent's answer is dropped. Returns {key: response} to send; answers to unknown, answered
    or replaced keys are left out (the spec's "ignore keys that are not outstanding"), and so are
    answers to questions of kinds outside `kinds` (the agent was never shown them) when it is given."""
    rows = {
        row.key_hash: row
        for row in InputRequest.objects.filter(task=task, state="open")
        if kinds is None or kinds.allows(row.method, row.params)
    }
    claimed: dict[str, Any] = {}
    now = timezone.now()
    for key, response in responses.items():
        match = next((rows[h] for h in crypto.fingerprints(key) if h in rows), None)
        if match is None or not isinstance(response, dict):
            continue
        won = InputRequest.objects.filter(pk=match.pk, state="open").update(
            state="sending", response=response, answered_by_agent=agent, answered_at=now, last_error=""
        )
        if won:
            claimed[key] = response
    return claimed


def gateway_answers_sent(*, task: RemoteTask, agent: Agent, keys: list[str]) -> None:
    """The server acknowledged the agent's answers: record them, once, and look at the task again."""
    hashes = [h for key in keys for h in crypto.fingerprints(key)]
    with transaction.atomic():
        rows = list(InputRequest.objects.filter(task=task, key_hash__in=hashes, state="sending"))
        InputRequest.objects.filter(pk__in=[row.pk for row in rows]).update(
            state="answered", sent_at=timezone.now()
        )
        RemoteTask.objects.filter(pk=task.pk).update(refresh_wanted_at=timezone.now())
        for row in rows:
            action = AUDITED_ACTIONS.get(str((row.response or {}).get("action")), "answer")
            verb = ACTION_VERBS[action]
            task_note(task=task, source="operator", note=f"agent {agent.name} {verb} {row.method}")
            audit(None, action, task=task, agent=agent, detail={"method": row.method, "via": "gateway"})
        events.publish_task_changed(task.pk, inbox=True)
        events.nudge_workers(task.pk)


def gateway_answers_failed(*, task: RemoteTask, agent: Agent, keys: list[str], error: str) -> None:
    """The server refused or could not be reached: the questions are open again, for anyone."""
    hashes = [h for key in keys for h in crypto.fingerprints(key)]
    with transaction.atomic():
        InputRequest.objects.filter(task=task, key_hash__in=hashes, state="sending").update(
            state="open", last_error=error[:2000], answered_by_agent=None, answered_at=None
        )
        audit(None, "answer", task=task, agent=agent, ok=False, detail={"error": error, "via": "gateway"})
        events.publish_task_changed(task.pk, inbox=True)


def gateway_claim_cancel(*, task: RemoteTask, agent: Agent) -> bool:
    """The first cancel request of a task is sent; True when this one is it."""
    with transaction.atomic():
        first = RemoteTask.objects.filter(pk=task.pk, cancel_requested_at__isnull=True).update(
            cancel_requested_at=timezone.now()
        )
        if first:
            task_note(task=task, source="operator", note=f"cancel requested by agent {agent.name}")
            events.publish_task_changed(task.pk)
    return bool(first)


def gateway_cancel_sent(*, task: RemoteTask, agent: Agent) -> None:
    with transaction.atomic():
        RemoteTask.objects.filter(pk=task.pk).update(refresh_wanted_at=timezone.now())
        audit(None, "cancel", task=task, agent=agent, detail={"via": "gateway"})
        events.nudge_workers(task.pk)


def gateway_cancel_failed(*, task: RemoteTask, agent: Agent, error: str) -> None:
    with transaction.atomic():
        RemoteTask.objects.filter(pk=task.pk).update(cancel_requested_at=None)
        task_note(
            task=task, source="local", note=f"the cancel agent {agent.name} asked for was not delivered"
        )
        audit(None, "cancel", task=task, agent=agent, ok=False, detail={"error": error, "via": "gateway"})
        events.publish_task_changed(task.pk)
