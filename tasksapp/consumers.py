"""One websocket per page. Thin and read-only: join the page's groups, re-read what changed,
render the same partial the page rendered, and send it as an out-of-band swap."""

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from tasksapp import events
from tasksapp.connections import database_sync_to_async
from tasksapp.models import InputRequest, McpServer, RemoteTask
from tasksapp.permissions import VIEW, can, roles_of
from tasksapp.views.present import input_view, task_context

PAGES = {"overview", "tasks", "task", "inbox", "servers"}
OVERVIEW_COALESCE_SECONDS = 1.0


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    groups: list[str]
    _overview_due: asyncio.Task[None] | None

    async def connect(self) -> None:
        user = self.scope.get("user")
        params = parse_qs(self.scope.get("query_string", b"").decode())
        self.page = (params.get("page") or [""])[0]
        task = (params.get("task") or [""])[0]
        self.task_id = int(task) if task.isdigit() else None
        if user is None or not await database_sync_to_async(can)(user, VIEW) or self.page not in PAGES:
            await self.close(code=4403)
            return
        self.fresh = (params.get("fresh") or [""])[0] == "1"
        self.known: set[int] = await database_sync_to_async(self._shown)()
        self.groups = self._groups()
        for group in self.groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    def _shown(self) -> set[int]:
        """The task ids the page was rendered with: those are replaced in place, new ones added."""
        if self.page == "inbox":
            from tasksapp.views.inbox import open_requests

            return {row.task_id for row in open_requests()}
        if self.page == "tasks" and self.fresh:
            return set(RemoteTask.objects.values_list("id", flat=True)[:50])
        return set()

    def _groups(self) -> list[str]:
        if self.page == "task" and self.task_id is not None:
            return [events.task_group(self.task_id)]
        return {
            "overview": [events.TASKS, events.SERVERS],
            "tasks": [events.TASKS],
            "inbox": [events.INBOX],
            "servers": [events.SERVERS],
        }.get(self.page, [])

    async def disconnect(self, code: int) -> None:
        if (pending := getattr(self, "_overview_due", None)) is not None:
            pending.cancel()
        for group in getattr(self, "groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing is accepted from the browser: actions are CSRF-protected POSTs."""

    async def task_changed(self, event: dict[str, Any]) -> None:
        if self.page == "overview":
            self._refresh_overview_soon()
            return
        html = await database_sync_to_async(self._render_task)(int(event["id"]))
        if html:
            await self.send(text_data=html)

    def _refresh_overview_soon(self) -> None:
        """The overview aggregates every task: coalesce bursts of changes into one render a second."""
        if getattr(self, "_overview_due", None) is None:
            self._overview_due = asyncio.create_task(self._refresh_overview())

    async def _refresh_overview(self) -> None:
        try:
            await asyncio.sleep(OVERVIEW_COALESCE_SECONDS)
            # Its own thread: an expensive aggregate must not queue behind the worker's writes. The
            # thread's connection is checked and handed back like any other (tasksapp.connections).
            html = await database_sync_to_async(_overview, thread_sensitive=False)(self.scope["user"])
            await self.send(text_data=html)
        finally:
            self._overview_due = None

    async def server_changed(self, event: dict[str, Any]) -> None:
        if self.page == "overview":
            self._refresh_overview_soon()
            return
        html = await database_sync_to_async(self._render_server)(int(event["id"]))
        if html:
            await self.send(text_data=html)

    def _render_task(self, pk: int) -> str:
        user = self.scope["user"]
        task = RemoteTask.objects.select_related("server", "started_by").filter(pk=pk).first()
        if task is None:
            return ""
        if self.page == "tasks":
            return self._placed(
                pk,
                "tasksapp/task_list.html#task-row",
                {"task": task},
                "afterbegin:#task-rows",
                add=self.fresh,
            )
        if self.page == "inbox":
            rows = InputRequest.objects.filter(task=task, state="open").select_related("task__server")
            live = not task.is_terminal and not task.expired
            item = {"task": task, "inputs": [input_view(row) for row in rows] if live else []}
            context = {"item": item, "request": _FakeRequest("/inbox/"), **self._form_context(user)}
            return self._placed(
                pk,
                "tasksapp/inbox.html#inbox-task",
                context,
                "beforeend:#inbox-items",
                add=bool(item["inputs"]),
            )
        if self.page == "task" and pk == self.task_id:
            context = {
                **task_context(task, user),
                **self._form_context(user),
                "oob": True,
                "request": _FakeRequest(f"/tasks/{pk}/"),
            }
            return "".join(
                render_to_string(f"tasksapp/task_detail.html#{name}", context)
                for name in ("task-card", "task-inputs", "task-result", "task-timeline", "task-raw")
            )
        return ""

    def _form_context(self, user: Any) -> dict[str, Any]:
        """Forms sent over the socket need the CSRF token the page would have had (the cookie's
        secret, which Django accepts as a form token)."""
        return {**roles_of(user), "csrf_token": self.scope.get("cookies", {}).get("csrftoken", "")}

    def _placed(self, pk: int, template: str, context: dict[str, Any], append: str, *, add: bool) -> str:
        """Replace the element the page already shows, or add it where new ones go."""
        if pk in self.known or (self.page == "tasks" and not self.fresh):
            return render_to_string(template, {**context, "oob": True})  # absent ids are ignored by htmx
        if not add:
            return ""
        first = not self.known
        self.known.add(pk)
        fresh = render_to_string(template, {**context, "oob": False})
        gone = '<p id="inbox-empty" hx-swap-oob="delete"></p>' if self.page == "inbox" and first else ""
        return (
            f'<template hx-swap-oob="{append}">{fresh}</template>{gone}'
            if self.page == "tasks"
            else (f'<div hx-swap-oob="{append}">{fresh}</div>{gone}')
        )

    def _render_server(self, pk: int) -> str:
        user = self.scope["user"]
        server = McpServer.objects.filter(pk=pk).first()
        if server is None or self.page != "servers":
            return ""
        return render_to_string(
            "tasksapp/servers.html#server-row", {"server": server, "oob": True, **roles_of(user)}
        )


def _overview(user: Any) -> str:
    from tasksapp.views.overview import overview_context

    return render_to_string(
        "tasksapp/overview.html#overview-live", {**overview_context(), "oob": True, **roles_of(user)}
    )


class _FakeRequest:
    """Partials read request.path for their 'next' links; a websocket has no HTTP request."""

    def __init__(self, path: str) -> None:
        self.path = path
