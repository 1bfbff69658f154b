"""Reading settings from the environment, failing early with a message that names the variable."""

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below its minimum of {minimum}.")
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_hosts(name: str, default: str) -> list[str]:
    """A comma-separated allow-list of host names, host:port, addresses and networks, each checked."""
    from tasksapp.mcpclient.addresses import Allowed  # pure code: no Django, no app registry

    entries = env_list(name, default)
    for entry in entries:
        try:
            Allowed.parse(entry)
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {exc}; expected host names, host:port, addresses or networks such as "
                "auth.internal, auth.internal:8443, 10.0.0.0/8 or ::1, separated by commas."
            ) from None
    return entries


def secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else a random key kept in var/ so logins survive restarts."""
    key = os.environ.get("SECRET_KEY")
    if key:
        if len(key) < 32:
            raise ImproperlyConfigured("SECRET_KEY is shorter than 32 characters; use a long random value.")
        return key
    path = var_dir / "secret_key"
    if not path.exists():
        private_dir(var_dir)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


def private_dir(path: Path) -> None:
    """Create the directory for the dashboard's own data, readable by its owner only (0700)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def private_file(path: Path) -> None:
    """Create (empty) or restrict a file to its owner (0600): SQLite gives its -wal and -shm files
    the database file's mode, so they follow."""
    path.touch(mode=0o600, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
