"""A person's display preferences, written (UserPreference; read by tasksapp.prefs)."""

from typing import Any

from tasksapp.models import UserPreference


def preference_set(*, user: Any, **fields: str) -> UserPreference:
    """Save some of `user`'s preferences (time_zone, theme, language); the others stay as they were."""
    preference, _created = UserPreference.objects.get_or_create(user=user)
    for name, value in fields.items():
        setattr(preference, name, value)
    preference.save()
    return preference
