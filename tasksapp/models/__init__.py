"""The models of tasksapp, one module per part of the domain; every model is importable from here.

- servers: McpServer, ServerHealth (each worker's view of a server), ServerAuthorization (OAuth)
- tasks: RemoteTask and its reads, InputRequest, TaskEvent
- calls: PendingCall (a tools/call waiting for input before any task exists)
- audit: OperatorAction
- people: Agent, UserPreference
- figures: TaskCount, TaskHour (kept by triggers), GatewayTraffic
- workers: WorkerHeartbeat, Chore
- notify: NotificationPreference, NotificationOutbox, NotifyCursor
- HashedSession, the session row, lives with its store in tasksapp.sessions (SESSION_ENGINE names
  that module) and is registered here.

Importing this package registers every model with the app (label "tasksapp", tables
tasksapp_<model>). Bearer secrets are stored encrypted, found by fingerprint; see tasksapp.lib.crypto.
"""

from tasksapp.models.audit import OperatorAction
from tasksapp.models.calls import PendingCall, PendingCallQuerySet
from tasksapp.models.figures import LATENCY_BOUNDS_MS, GatewayTraffic, TaskCount, TaskHour
from tasksapp.models.notify import EVENTS, NotificationOutbox, NotificationPreference, NotifyCursor
from tasksapp.models.people import Agent, UserPreference
from tasksapp.models.servers import (
    GATEWAY_POLICIES,
    GATEWAY_POLICY_CHOICES,
    HEALTH_WORDS,
    LARGE_SERVER_COLUMNS,
    McpServer,
    McpServerQuerySet,
    ServerAuthorization,
    ServerHealth,
    holder_key,
    watched_servers,
)
from tasksapp.models.tasks import (
    LARGE_TASK_COLUMNS,
    STALE_SERVERS,
    STATUS_WORDS,
    TERMINAL,
    VIA_WORDS,
    InputRequest,
    RemoteTask,
    RemoteTaskQuerySet,
    TaskEvent,
    ended_at,
    holder_failing,
    stale,
    status_label,
)
from tasksapp.models.workers import Chore, WorkerHeartbeat
from tasksapp.sessions import HashedSession

__all__ = [
    "EVENTS",
    "GATEWAY_POLICIES",
    "GATEWAY_POLICY_CHOICES",
    "HEALTH_WORDS",
    "LARGE_SERVER_COLUMNS",
    "LARGE_TASK_COLUMNS",
    "LATENCY_BOUNDS_MS",
    "STALE_SERVERS",
    "STATUS_WORDS",
    "TERMINAL",
    "VIA_WORDS",
    "Agent",
    "Chore",
    "GatewayTraffic",
    "HashedSession",
    "InputRequest",
    "McpServer",
    "McpServerQuerySet",
    "NotificationOutbox",
    "NotificationPreference",
    "NotifyCursor",
    "OperatorAction",
    "PendingCall",
    "PendingCallQuerySet",
    "RemoteTask",
    "RemoteTaskQuerySet",
    "ServerAuthorization",
    "ServerHealth",
    "TaskCount",
    "TaskEvent",
    "TaskHour",
    "UserPreference",
    "WorkerHeartbeat",
    "ended_at",
    "holder_failing",
    "holder_key",
    "stale",
    "status_label",
    "watched_servers",
]
