"""The audit log: every operator's (or agent's) action, recorded by the service that carries it out."""

from typing import Any

from tasksapp.models import Agent, McpServer, OperatorAction, PendingCall, RemoteTask


def export_record(*, user: Any, detail: dict[str, Any]) -> None:
    """Audit a download of the task list or the audit log (what, which format, which filters)."""
    audit(user, "export", detail={**detail, "summary": _export_summary(detail)})


def _export_summary(detail: dict[str, Any]) -> str:
    filters = ", ".join(f"{key}={value}" for key, value in detail.get("filters", {}).items())
    return f"{detail.get('what')} as {detail.get('format')}" + (f" ({filters})" if filters else "")


def audit(
    user: Any,
    action: str,
    *,
    server: McpServer | None = None,
    task: RemoteTask | None = None,
    pending: PendingCall | None = None,
    ok: bool = True,
    detail: dict[str, Any] | None = None,
    agent: Agent | None = None,
) -> None:
    """Record an operator's (or an agent's) action in the audit log (inside the caller's
    transaction, if any)."""
    OperatorAction.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        agent=agent,
        action=action,
        server=server or (task.server if task else None),
        task=task,
        pending_call=pending,
        ok=ok,
        detail=detail or {},
    )
