"""Deploy checks (`manage.py check --deploy`) for what Django's own checks do not know about."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

MIN_KEY_LENGTH = 32
MIN_KEY_CHARACTERS = 10
HOW = 'generate one with: python -c "import secrets; print(secrets.token_urlsafe(48))"'


def weak(key: str) -> bool:
    return len(key) < MIN_KEY_LENGTH or len(set(key)) < MIN_KEY_CHARACTERS


@register(Tags.security, deploy=True)
def encryption_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    key: str = settings.DASHBOARD_ENCRYPTION_KEY
    if not key:
        return [
            Error(
                "DASHBOARD_ENCRYPTION_KEY is not set, so stored credentials and task ids are encrypted "
                "under a key derived from SECRET_KEY: rotating SECRET_KEY would make them unreadable.",
                hint=f"Set DASHBOARD_ENCRYPTION_KEY to a long random value of its own; {HOW}. "
                "Put the value used so far (SECRET_KEY) in DASHBOARD_ENCRYPTION_KEY_FALLBACKS, "
                "then run manage.py rekey.",
                id="tasksapp.E001",
            )
        ]
    messages: list[CheckMessage] = []
    if weak(key):
        messages.append(
            Error(
                f"DASHBOARD_ENCRYPTION_KEY is weak: use at least {MIN_KEY_LENGTH} characters with at "
                f"least {MIN_KEY_CHARACTERS} different ones.",
                hint=HOW,
                id="tasksapp.E002",
            )
        )
    if key == settings.SECRET_KEY:
        messages.append(
            Warning(
                "DASHBOARD_ENCRYPTION_KEY equals SECRET_KEY; give each its own value so that either "
                "can be rotated without the other.",
                id="tasksapp.W001",
            )
        )
    return messages
