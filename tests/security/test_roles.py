"""Every POST endpoint refuses anonymous, no-role and viewer users; responses are never cached.

Each refusal is checked on the database too (nothing was sent, answered, cancelled or saved), and
each endpoint is also used by a user who may, so a refusal cannot come from a broken request.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.models import InputRequest, McpServer, OperatorAction, PendingCall, RemoteTask
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def client_as(role: str | None) -> Client:
    client = Client()
    if role is not None:
        user = User.objects.create_user(f"u-{role}", password="pw-for-tests-only")
        if role != "none":
            user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
    return client


@dataclass
class World:
    server: McpServer
    task: RemoteTask
    request: InputRequest
    pending: PendingCall


@pytest.fixture
def world(demo_registered: McpServer) -> Iterator[World]:
    asked = services.call_start(server=demo_registered, tool="ask_form", arguments={"delay": 0.05}, user=None)
    assert asked.task is not None
    run_worker_until(lambda: InputRequest.objects.filter(state="open").exists())
    pending = services.call_start(server=demo_registered, tool="mrtr_then_task", arguments={}, user=None)
    assert pending.pending is not None
    yield World(demo_registered, asked.task, InputRequest.objects.get(state="open"), pending.pending)


def posts(world: World) -> dict[str, tuple[str, dict[str, str]]]:
    """Every POST endpoint, with a body that a permitted user's request would act on."""
    server, task = world.server.pk, world.task.pk
    return {
        "answer an input request": (
            reverse("tasks:answer", args=[world.request.pk]),
            {"action": "decline", "next": "/inbox/"},
        ),
        "answer a pre-task (MRTR) question": (
            reverse("tasks:pending-answer", args=[world.pending.pk]),
            {"ir1-action": "accept", "ir1-name": "Ada"},
        ),
        "cancel a task": (reverse("tasks:cancel", args=[task]), {}),
        "run a tool": (reverse("tasks:tool-run", args=[server, "echo"]), {"text": "hi"}),
        "add a server": (
            reverse("tasks:server-add"),
            {"name": "second", "url": world.server.url, "headers": "", "save": "1"},
        ),
        "edit a server": (
            reverse("tasks:server-edit", args=[server]),
            {"name": "renamed", "url": world.server.url, "headers": "", "enabled": "on"},
        ),
        "discover a server again": (reverse("tasks:server-refresh", args=[server]), {}),
    }


def state(world: World) -> tuple[object, ...]:
    world.request.refresh_from_db()
    world.pending.refresh_from_db()
    world.task.refresh_from_db()
    return (
        world.request.state,
        world.pending.state,
        world.pending.rounds,
        world.task.cancel_requested_at,
        RemoteTask.objects.count(),
        list(McpServer.objects.values_list("name", flat=True)),
        OperatorAction.objects.count(),
    )


@pytest.mark.parametrize("role", [None, "none", "viewer"])
def test_every_post_endpoint_refuses_who_may_not_act(world: World, role: str | None) -> None:
    client = client_as(role)
    before = state(world)
    for what, (url, body) in posts(world).items():
        response = client.post(url, body)
        if role is None:
            assert response.status_code == 302 and response["Location"].startswith("/login/"), what
        else:
            assert response.status_code == 403, what
            assert "Your role does not allow this" in response.content.decode(), what
    assert state(world) == before


def test_the_same_posts_work_for_an_operator_and_an_admin(world: World) -> None:
    operator, admin = client_as("operator"), client_as("admin")
    endpoints = posts(world)
    for what in (
        "answer an input request",
        "answer a pre-task (MRTR) question",
        "cancel a task",
        "run a tool",
    ):
        url, body = endpoints[what]
        assert operator.post(url, body).status_code in (200, 302), what
    world.request.refresh_from_db()
    world.pending.refresh_from_db()
    world.task.refresh_from_db()
    assert world.request.state != "open" and world.pending.state == "done"
    assert world.task.cancel_requested_at is not None
    for what in ("discover a server again", "edit a server", "add a server"):
        url, body = endpoints[what]
        assert operator.post(url, body).status_code == 403, what
        assert admin.post(url, body).status_code == 302, what
    assert set(McpServer.objects.values_list("name", flat=True)) == {"renamed", "second"}


def test_pages_and_downloads_are_never_cached(world: World) -> None:
    viewer = client_as("viewer")
    urls = [
        reverse("tasks:overview"),
        reverse("tasks:list"),
        reverse("tasks:detail", args=[world.task.pk]),
        reverse("tasks:raw", args=[world.task.pk]),
        reverse("tasks:inbox"),
        reverse("tasks:pending", args=[world.pending.pk]),
        reverse("tasks:servers"),
        reverse("tasks:audit"),
        reverse("login"),
    ]
    for url in urls:
        response = viewer.get(url)
        assert response.status_code == 200, url
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"], url


def test_a_task_id_is_found_by_post_and_never_travels_in_a_url(world: World) -> None:
    viewer = client_as("viewer")
    task_id = world.task.remote_id

    found = viewer.post(reverse("tasks:find"), {"task_id": task_id})
    assert found.status_code == 302 and found["Location"] == reverse("tasks:detail", args=[world.task.pk])
    missing = viewer.post(reverse("tasks:find"), {"task_id": "no-such-id"}, follow=True)
    assert "No task has that id." in missing.content.decode()
    assert all("no-such-id" not in url for url, _ in missing.redirect_chain)
    listed = viewer.get(reverse("tasks:list"), {"q": task_id})
    assert listed.status_code == 200 and f"task-row-{world.task.pk}" not in listed.content.decode()
    page = viewer.get(reverse("tasks:list")).content.decode()
    assert 'method="post" action="/tasks/find/"' in page and 'name="task_id"' in page
