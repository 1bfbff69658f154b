from typing import Any

from django.core.management.base import CommandError, CommandParser

from tasksapp import services
from tasksapp.management.commands._base import JsonCommand, json_argument
from tasksapp.models import PendingCall
from tasksapp.serializers import pending_json, task_json


class Command(JsonCommand):
    help = "Show and answer the calls a server asked input for before starting them (MRTR)."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        verbs = parser.add_subparsers(dest="verb", required=True)
        show = verbs.add_parser("show", help="the call's open input requests, keyed by the server's keys")
        show.add_argument("id", type=int)
        answer = verbs.add_parser("answer", help="retry the call with inputResponses (and its requestState)")
        answer.add_argument("id", type=int)
        answer.add_argument("responses", help='RESPONSES_JSON: {"<key>": {"action": "accept", …}}')
        for sub in (show, answer):
            sub.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        pending = PendingCall.objects.select_related("server").filter(pk=options["id"]).first()
        if pending is None:
            raise CommandError(f"no pending call #{options['id']}")
        if options["verb"] == "show":
            self.emit(options, pending_json(pending), f"pending call #{pending.pk} ({pending.state})")
            return
        responses = json_argument(options["responses"], "RESPONSES_JSON")
        try:
            started = services.pending_call_answer(pending=pending, responses=responses, user=None)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        data: dict[str, Any]
        if started.task is not None:
            data = {"outcome": "task", "task": task_json(started.task)}
            text = f"task #{started.task.pk} {started.task.status}"
        elif started.pending is not None:
            data = {"outcome": "input_required", "pendingCall": pending_json(started.pending)}
            text = f"more input needed (pending call #{started.pending.pk})"
        else:
            data = {"outcome": "result", "result": started.result}
            text = "result: " + str(started.result)
        self.emit(options, data, text)
