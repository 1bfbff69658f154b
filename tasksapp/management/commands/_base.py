"""What the operator commands share: --json output and one-line errors."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasksapp.services import ServiceError


class JsonCommand(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def emit(self, options: dict[str, Any], data: Any, text: str) -> None:
        if options.get("json"):
            self.stdout.write(json.dumps(data, ensure_ascii=False, default=str))
        else:
            self.stdout.write(text)


def parse_json_object(text: str | None, what: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CommandError(f'{what} must be a JSON object, like {{"key": "value"}}')
    return value


def parse_headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise CommandError(f"--header {value!r} is not 'Name: value'")
        headers[name.strip()] = content.strip()
    return headers


def service_error(exc: ServiceError) -> CommandError:
    return CommandError(str(exc))
