"""Running a tool from a form built from its inputSchema, and handling the three outcomes."""

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect

from tasksapp import services
from tasksapp.models import McpServer, RemoteTask
from tasksapp.permissions import START, require
from tasksapp.presenters.task import content_blocks, pretty
from tasksapp.queryparams import parse_id
from tasksapp.schemaforms.tools import tool_form
from tasksapp.views.common import page


def _tool(server: McpServer, name: str) -> dict[str, Any]:
    if tool := server.stored_tool(name):
        return tool
    raise Http404(f"{server.name} has no tool named {name!r}; discover the server again if it is new.")


@require(START)
def tool_run(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    tool = _tool(server, name)
    schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {}
    initial = None
    if again := request.GET.get("again", ""):
        previous = RemoteTask.objects.filter(pk=parse_id(again) or 0, server=server).first()
        initial = previous.arguments if previous else None
    form = tool_form(
        schema, data=request.POST if request.method == "POST" else None, initial_arguments=initial
    )
    context: dict[str, Any] = {"server": server, "tool": tool, "form": form}
    if request.method == "POST" and form.is_valid():
        try:
            started = services.call_start(
                server=server, tool=name, arguments=form.arguments(), user=request.user
            )
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            if started.task is not None:
                return redirect("tasks:detail", pk=started.task.pk)
            if started.pending is not None:
                return redirect("tasks:pending", pk=started.pending.pk)
            result = started.result or {}
            context.update(
                result=result,
                blocks=content_blocks(result),
                structured=pretty(result.get("structuredContent")),
            )
    return page(request, "tasksapp/tool_run.html", context, nav="servers")
