from django.urls import path, register_converter

from tasksapp.toolpaths import ToolNameConverter
from tasksapp.views import (
    agents,
    audit,
    bulk_tasks,
    inbox,
    inbox_bulk,
    notify,
    oauth,
    ops,
    overview,
    prefs,
    servers,
    tasks,
    tools,
)

app_name = "tasks"
register_converter(ToolNameConverter, "tool")  # any name a server sends, as one safe segment

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("tasks/", tasks.task_list, name="list"),
    path("tasks/find/", tasks.task_find, name="find"),
    path("tasks/export.<str:fmt>", tasks.task_export, name="export"),
    path("tasks/<int:pk>/", tasks.task_detail, name="detail"),
    path("tasks/<int:pk>/cancel/", tasks.task_cancel, name="cancel"),
    path("tasks/<int:pk>/raw.json", tasks.task_raw, name="raw"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("inputs/<int:pk>/answer/", inbox.answer, name="answer"),
    path("calls/<int:pk>/", inbox.pending_detail, name="pending"),
    path("calls/<int:pk>/answer/", inbox.pending_answer, name="pending-answer"),
    path("calls/<int:pk>/dismiss/", inbox.pending_dismiss, name="pending-dismiss"),
    path("servers/", servers.server_list, name="servers"),
    path("servers/add/", servers.server_add, name="server-add"),
    path("servers/<int:pk>/edit/", servers.server_edit, name="server-edit"),
    path("servers/<int:pk>/refresh/", servers.server_refresh, name="server-refresh"),
    path("servers/<int:pk>/tools/", servers.server_tools, name="server-tools"),
    path("servers/<int:pk>/archive/", servers.server_archive, name="server-archive"),
    path("servers/<int:pk>/tools/<tool:name>/run/", tools.tool_run, name="tool-run"),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/export.<str:fmt>", audit.audit_export, name="audit-export"),
    path("metrics", ops.metrics_view, name="metrics"),
    path("healthz", ops.healthz, name="healthz"),
    path("servers/<int:pk>/connect/", oauth.connect, name="oauth-connect"),
    path("servers/<int:pk>/disconnect/", oauth.disconnect, name="oauth-disconnect"),
    path("servers/<int:pk>/oauth/", oauth.client_settings, name="oauth-settings"),
    path("servers/<int:pk>/oauth/confirm-issuer/", oauth.confirm_issuer, name="oauth-confirm-issuer"),
    path("oauth/callback", oauth.callback, name="oauth-callback"),
    path("oauth/client-metadata.json", oauth.client_metadata, name="oauth-client-metadata"),
    # shell: preferences, the theme button, keyboard shortcuts
    path("preferences/", prefs.preferences, name="preferences"),
    path("preferences/theme/", prefs.theme, name="theme"),
    path("shortcuts/", prefs.shortcuts, name="shortcuts"),
    # inbox: bulk answers, bulk task actions, notification settings
    path("inbox/bulk/", inbox_bulk.inbox_bulk, name="inbox-bulk"),
    path("tasks/bulk/", bulk_tasks.task_bulk, name="bulk"),
    path("notifications/", notify.notify_settings, name="notify"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/<int:pk>/revoke/", agents.agent_revoke_view, name="agent-revoke"),
    path("servers/<int:pk>/gateway/", agents.gateway_policy, name="gateway-policy"),
]
