"""`python manage.py rekey`: rewrite every stored secret under the current encryption key."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tasksapp.services.secrets import secrets_rekey


class Command(BaseCommand):
    help = (
        "Re-encrypt server credentials, task ids, input keys and requestState under the current "
        "DASHBOARD_ENCRYPTION_KEY (after a key change; the old key must be in "
        "DASHBOARD_ENCRYPTION_KEY_FALLBACKS). Safe to run again; exits 1 if some secret is unreadable."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = secrets_rekey()
        self.stdout.write(str(report))
        if report.unreadable:
            raise CommandError(
                "some secrets are unreadable: add the key they were written under to "
                "DASHBOARD_ENCRYPTION_KEY_FALLBACKS and run rekey again (see docs/security.md)."
            )
