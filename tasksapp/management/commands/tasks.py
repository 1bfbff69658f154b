from typing import Any

from django.core.management.base import CommandError, CommandParser

from tasksapp import services
from tasksapp.management.commands._base import JsonCommand, json_argument
from tasksapp.models import McpServer, RemoteTask
from tasksapp.serializers import task_json, task_row_json


class Command(JsonCommand):
    help = "List, show, answer and cancel mirrored tasks."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        verbs = parser.add_subparsers(dest="verb", required=True)
        listing = verbs.add_parser("list")
        listing.add_argument("--status", help="working, input_required, completed, failed, cancelled")
        listing.add_argument("--server", help="a server name")
        show = verbs.add_parser("show")
        show.add_argument("id", type=int)
        answer = verbs.add_parser("answer", help="send one answer with tasks/update")
        answer.add_argument("id", type=int)
        answer.add_argument("key")
        answer.add_argument("response", help='RESPONSE_JSON, e.g. {"action": "accept", "content": {…}}')
        cancel = verbs.add_parser("cancel")
        cancel.add_argument("id", type=int)
        adopt = verbs.add_parser("adopt", help="add a task the dashboard failed to record, by its task id")
        adopt.add_argument("server", help="the server's name")
        adopt.add_argument("task_id", help="the taskId the server gave")
        adopt.add_argument("--tool", default="(adopted)", help="the tool that started it, for display")
        for sub in (listing, show, answer, cancel, adopt):
            sub.add_argument("--json", action="store_true")

    def run_from_argv(self, argv: list[str]) -> None:
        # Input keys are opaque and may start with '-' (fastmcp's hold the task id): after
        # `answer`, flags go first and everything else is a value.
        if len(argv) > 2 and argv[2] in ("answer", "adopt") and "--" not in argv:
            flags = [word for word in argv[3:] if word in ("--json", "-h", "--help", "--traceback")]
            if argv[2] == "adopt" and "--tool" in argv[3:-1]:
                at = argv.index("--tool", 3)
                flags += argv[at : at + 2]
                argv = [*argv[:at], *argv[at + 2 :]]
            values = [word for word in argv[3:] if word not in flags]
            argv = [*argv[:3], *flags, "--", *values]
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        if verb == "list":
            self._list(options)
            return
        if verb == "adopt":
            self._adopt(options)
            return
        task = RemoteTask.objects.select_related("server").filter(pk=options["id"]).first()
        if task is None:
            raise CommandError(f"no task #{options['id']}")
        try:
            if verb == "answer":
                response = json_argument(options["response"], "RESPONSE_JSON")
                services.task_answer(task=task, key=options["key"], response=response, user=None)
            elif verb == "cancel":
                services.task_cancel(task=task, user=None)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        task.refresh_from_db()
        data = task_json(task)
        self.emit(options, data, task_text(task, data, full=verb == "show"))

    def _adopt(self, options: dict[str, Any]) -> None:
        server = McpServer.objects.filter(name=options["server"]).first()
        if server is None:
            raise CommandError(f"no server named {options['server']!r}; see `manage.py servers list`")
        try:
            task = services.task_adopt(
                server=server, task_id=options["task_id"], tool_name=options["tool"], user=None
            )
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.emit(options, task_json(task), f"adopted as task #{task.pk}: {task.display_status}")

    def _list(self, options: dict[str, Any]) -> None:
        tasks = RemoteTask.objects.select_related("server")
        if options["status"]:
            tasks = tasks.filter(status=options["status"])
        if options["server"]:
            tasks = tasks.filter(server__name=options["server"])
        rows = [task_row_json(task) for task in tasks[:1000]]
        lines = [f"#{r['id']:<6} {r['display']:26} {r['server']:16} {r['tool']}" for r in rows]
        self.emit(options, rows, "\n".join(lines) or "no tasks")


def task_text(task: RemoteTask, data: dict[str, Any], *, full: bool) -> str:
    """The text form: the status line, then (for `show`) open input requests and the history."""
    lines = [
        f"task #{task.pk} {task.tool_name} on {task.server.name}: {task.display_status}"
        + (f" — {task.status_message}" if task.status_message else "")
    ]
    if not full:
        return lines[0]
    if task.last_error:
        lines.append(f"last error: {task.last_error}")
    requests = data["inputRequests"]
    lines.append(f"open input requests: {len(requests) or 'none'}")
    for key, request in requests.items():
        message = request["params"].get("message", "") if isinstance(request["params"], dict) else ""
        lines.append(f"  {key}  {request['method']}  {str(message)[:200]}")
    lines.append("history:")
    for event in task.events.all():
        text = event.note or event.status_message
        lines.append(f"  {event.observed_at:%Y-%m-%d %H:%M:%S}  {event.source:8}  {event.status:15}  {text}")
    return "\n".join(lines)
