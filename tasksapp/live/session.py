"""Is the session a socket was opened with still signed in, as the same active user?"""

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare


def session_key_of(scope: dict[str, Any]) -> str:
    session = scope.get("session")
    return str(getattr(session, "session_key", "") or "")


def still_signed_in(session_key: str, user_pk: Any) -> bool:
    """What the next page load would find: the session exists, names this user, its password
    hash still matches (a password change signs out), and the user may still log in (active).

    Read-only, unlike django.contrib.auth.get_user, which may flush or re-key the session."""
    if not session_key:
        return False
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    backend_path = data.get(BACKEND_SESSION_KEY)
    if str(data.get(SESSION_KEY)) != str(user_pk) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    user = load_backend(backend_path).get_user(user_pk)  # None when deleted or inactive
    if user is None or not user.is_active:
        return False
    stored = str(data.get(HASH_SESSION_KEY) or "")
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return bool(stored) and any(constant_time_compare(stored, known) for known in hashes)
