"""The code that writes the task mirror and its servers. Views, the worker, the admin and the
commands call these.

Writes owned elsewhere, each by the one module named (tests/test_writers.py holds this list):
- tasksapp.engine.store: the worker's own bookkeeping: leases and poll schedules on RemoteTask,
  its WorkerHeartbeat row;
- tasksapp.notify.scan, tasksapp.notify.security, tasksapp.notify.send: the notification outbox
  and the scan's cursors (NotificationOutbox, NotifyCursor);
- tasksapp.sessions: the session store's rows;
- tasksapp.login_throttle: the login throttle's attempt rows (django-axes);
- tasksapp.permissions: the role groups, at migrate;
- tasksapp.management.commands.demo: the demo's users;
- tasksapp.healthcheck: /healthz's write probe (its Chore row);
- tasksapp.retention.purge, tasksapp.retention.chores: deleting what is past its retention, and
  the chores' bookkeeping (Chore, TaskCount).
"""

from tasksapp.services.audit import export_record
from tasksapp.services.calls import (
    CallStarted,
    call_start,
    pending_call_answer,
    pending_call_dismiss,
    pending_calls_expire,
)
from tasksapp.services.errors import CallFailed, NotAllowed, NotRecorded, RemoteFailed, ServiceError
from tasksapp.services.health import (
    server_health_forget,
    server_record_failure,
    server_record_success,
    worker_views,
)
from tasksapp.services.inputs import input_prune_gone, input_resend_stuck, task_answer
from tasksapp.services.oauth import oauth_mark_needed
from tasksapp.services.prefs import preference_set
from tasksapp.services.servers import (
    DiscoveryPreview,
    same_origin,
    server_archive,
    server_create,
    server_preview,
    server_refresh,
    server_set_listen_support,
    server_unarchive,
    server_update,
)
from tasksapp.services.tasks import (
    task_adopt,
    task_apply_snapshot,
    task_cancel,
    task_create,
    task_mark_expired,
    task_record_error,
)

__all__ = [
    "CallFailed",
    "CallStarted",
    "DiscoveryPreview",
    "NotAllowed",
    "NotRecorded",
    "RemoteFailed",
    "ServiceError",
    "call_start",
    "export_record",
    "input_prune_gone",
    "input_resend_stuck",
    "oauth_mark_needed",
    "pending_call_answer",
    "pending_call_dismiss",
    "pending_calls_expire",
    "preference_set",
    "same_origin",
    "server_archive",
    "server_create",
    "server_health_forget",
    "server_preview",
    "server_record_failure",
    "server_record_success",
    "server_refresh",
    "server_set_listen_support",
    "server_unarchive",
    "server_update",
    "task_adopt",
    "task_answer",
    "task_apply_snapshot",
    "task_cancel",
    "task_create",
    "task_mark_expired",
    "task_record_error",
    "worker_views",
]
