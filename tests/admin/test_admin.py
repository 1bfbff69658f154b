"""The admin site: every model listed, mirrored rows read-only, actions through the services."""

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.models import McpServer, OperatorAction, RemoteTask

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = [
    "mcpserver",
    "remotetask",
    "inputrequest",
    "taskevent",
    "operatoraction",
    "pendingcall",
    "workerheartbeat",
]


@pytest.fixture
def admin_client(transactional_db: None) -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client = Client()
    client.force_login(user)
    return client


def test_every_model_has_a_changelist(admin_client: Client, demo_registered: McpServer) -> None:
    services.call_start(server=demo_registered, tool="slow_count", arguments={"n": 1}, user=None)
    for model in MODELS:
        page = admin_client.get(reverse(f"admin:tasksapp_{model}_changelist"))
        assert page.status_code == 200, model


def test_mirrored_rows_are_read_only_and_secrets_never_shown(
    admin_client: Client, demo_registered: McpServer
) -> None:
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None
    assert admin_client.get(reverse("admin:tasksapp_remotetask_add")).status_code == 403
    page = admin_client.get(reverse("admin:tasksapp_remotetask_change", args=[task.pk]))
    assert page.status_code == 200
    assert task.remote_id not in page.content.decode()
    response = admin_client.post(reverse("admin:tasksapp_remotetask_change", args=[task.pk]), {"status": "x"})
    assert response.status_code == 403
    services.task_cancel(task=task, user=None)


def test_the_cancel_action_goes_through_the_service(admin_client: Client, demo_registered: McpServer) -> None:
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None
    admin_client.post(
        reverse("admin:tasksapp_remotetask_changelist"),
        {"action": "cancel_tasks", "_selected_action": [task.pk]},
    )
    task.refresh_from_db()
    assert task.cancel_requested_at is not None
    assert OperatorAction.objects.filter(action="cancel", task=task, user__username="root").exists()


def test_adding_a_server_discovers_it_and_masks_its_headers(
    admin_client: Client, demo_server: object
) -> None:
    url = demo_server.url  # type: ignore[attr-defined]
    admin_client.post(
        reverse("admin:tasksapp_mcpserver_add"),
        {
            "name": "viaadmin",
            "url": url,
            "enabled": "on",
            "roots": "[]",
            "new_headers": "Authorization: Bearer admin-secret-1234",
        },
    )
    server = McpServer.objects.get(name="viaadmin")
    assert server.era == "modern" and server.headers == {"Authorization": "Bearer admin-secret-1234"}
    page = admin_client.get(reverse("admin:tasksapp_mcpserver_change", args=[server.pk])).content.decode()
    assert "admin-secret" not in page and "1234" in page


def test_the_admin_saves_roots_and_the_enabled_flag_through_the_services(
    admin_client: Client, demo_server: object
) -> None:
    url = demo_server.url  # type: ignore[attr-defined]
    roots = [{"uri": "file:///srv/data"}]
    fields = {"name": "rooted", "url": url, "roots": json.dumps(roots)}  # "enabled" unticked
    admin_client.post(reverse("admin:tasksapp_mcpserver_add"), fields)
    server = McpServer.objects.get(name="rooted")
    assert (server.enabled, server.roots) == (False, roots)
    added = OperatorAction.objects.get(action="server_add", server=server)
    assert (added.detail["enabled"], added.detail["roots"]) == (False, roots)

    moved = [{"uri": "file:///srv/other"}]
    change = reverse("admin:tasksapp_mcpserver_change", args=[server.pk])
    admin_client.post(change, {**fields, "roots": json.dumps(moved), "enabled": "on"})
    server.refresh_from_db()
    assert (server.enabled, server.roots) == (True, moved)
    edited = OperatorAction.objects.get(action="server_edit", server=server)
    assert edited.detail["changes"]["roots"] == [roots, moved]
    assert edited.detail["changes"]["enabled"] == [False, True]


def test_adding_an_unreachable_server_is_refused_with_a_message(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:tasksapp_mcpserver_add"),
        {"name": "nowhere", "url": "http://127.0.0.1:9/mcp", "enabled": "on", "roots": "[]"},
        follow=True,
    )
    assert not McpServer.objects.filter(name="nowhere").exists()
    assert "Not saved" in response.content.decode()
    assert not RemoteTask.objects.exists()
