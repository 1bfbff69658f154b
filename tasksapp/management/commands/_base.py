"""What the operator commands share: --json output, and input parsed into one-line errors."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasksapp.mcpclient.wire import parse_header_lines, parse_json_object


class JsonCommand(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def emit(self, options: dict[str, Any], data: Any, text: str) -> None:
        if options.get("json"):
            self.stdout.write(json.dumps(data, ensure_ascii=False, default=str))
        else:
            self.stdout.write(text)


def json_argument(text: str | None, what: str) -> dict[str, Any]:
    try:
        return parse_json_object(text, what) if text is not None else {}
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def header_arguments(values: list[str]) -> dict[str, str]:
    try:
        return parse_header_lines(values)
    except ValueError as exc:
        raise CommandError(f"--header {exc}") from None
