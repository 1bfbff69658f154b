"""Sessions are stored under a keyed hash of their key: a copy of the database is not a login
(tasksapp/sessions.py). The live socket authenticates through the same store and closes when the
session is gone."""

import subprocess
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore as ClearSessionStore
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import Client

from tasksapp.lib import crypto
from tests.support.live import HOST, closed_with, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "a-long-password-for-tests-7"


@pytest.fixture
def admin(settings: Any) -> User:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return User.objects.create_superuser("root", password=PASSWORD)


def logged_in_by_form() -> tuple[Client, str]:
    client = Client(HTTP_HOST=HOST)
    assert client.post("/login/", {"username": "root", "password": PASSWORD}).status_code == 302
    return client, client.cookies["sessionid"].value


def signed_in_with(cookie: str) -> bool:
    thief = Client(HTTP_HOST=HOST)
    thief.cookies["sessionid"] = cookie
    return thief.get("/").status_code == 200


def stored_keys() -> list[str]:
    """Every value a database copy has where a session key would be, in either table."""
    keys: list[str] = []
    tables = connection.introspection.table_names()
    with connection.cursor() as cursor:
        for table in ("tasksapp_session", "django_session"):
            if table in tables:
                cursor.execute(f"SELECT session_key FROM {table}")
                keys += [row[0] for row in cursor.fetchall()]
    return keys


def test_a_copy_of_the_database_holds_no_working_session_key(admin: User) -> None:
    client, cookie = logged_in_by_form()
    assert client.get("/").status_code == 200 and signed_in_with(cookie)
    keys = stored_keys()
    assert keys and cookie not in keys
    assert not any(signed_in_with(key) for key in keys)  # the stolen keys are not cookies
    if connection.vendor == "sqlite":  # the file itself, with its write-ahead log
        name = Path(connection.settings_dict["NAME"])
        files = [str(path) for path in (name, Path(f"{name}-wal")) if path.exists()]
        # Read by another process: closing a descriptor of the database file in this one would drop
        # every POSIX lock its SQLite connections hold, and the next process to open the database
        # would rebuild the write-ahead log's index under them (lost writes, then "disk I/O error").
        data = subprocess.run(["cat", *files], capture_output=True, check=True, timeout=30).stdout
        assert cookie.encode() not in data


def test_login_cycles_the_key_and_logout_deletes_the_row(admin: User) -> None:
    from tasksapp.sessions import HashedSession

    client = Client(HTTP_HOST=HOST)
    client.get("/login/")
    before = client.cookies["sessionid"].value if "sessionid" in client.cookies else ""
    client, cookie = logged_in_by_form()
    assert cookie != before and HashedSession.objects.filter(session_key=crypto.fingerprint(cookie)).exists()
    client.post("/logout/")
    assert not HashedSession.objects.filter(session_key__in=crypto.fingerprints(cookie)).exists()
    assert not signed_in_with(cookie)


def test_rotating_the_key_keeps_sessions_until_the_old_key_is_dropped(admin: User, settings: Any) -> None:
    from tasksapp.sessions import HashedSession

    old, new = "o" * 20 + "ld-key-0123456789", "n" * 20 + "ew-key-9876543210"
    settings.DASHBOARD_ENCRYPTION_KEY, settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = old, []
    crypto.reset()
    client, cookie = logged_in_by_form()
    settings.DASHBOARD_ENCRYPTION_KEY, settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = new, [old]
    crypto.reset()
    try:
        client.session["touched"] = True  # a write keeps the row under the fingerprint it has
        assert client.get("/").status_code == 200 and signed_in_with(cookie)
        assert HashedSession.objects.count() == 1
        settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = []
        crypto.reset()
        assert not signed_in_with(cookie)
    finally:
        crypto.reset()


def test_the_migration_signs_out_the_sessions_it_found_in_clear() -> None:
    loader = MigrationLoader(connection)
    (target,) = [
        key for key in loader.graph.nodes if key[0] == "tasksapp" and key[1].endswith("hashed_sessions")
    ]
    previous = next(
        parent for parent in loader.graph.node_map[target].parents if parent.key[0] == "tasksapp"
    ).key
    call_command("migrate", "tasksapp", previous[1], verbosity=0)
    try:
        clear = ClearSessionStore()
        clear["_auth_user_id"] = "1"
        clear.save()
        assert Session.objects.filter(session_key=clear.session_key).exists()
        call_command("migrate", "tasksapp", target[1], verbosity=0)
        assert not Session.objects.exists()
    finally:
        call_command("migrate", verbosity=0)


async def test_the_live_socket_signs_in_through_the_store_and_closes_when_the_row_goes(settings: Any) -> None:
    from tasksapp.sessions import HashedSession

    settings.LIVE_SESSION_CHECK_SECONDS = 1
    _, client = await sync_to_async(signed_in)()
    communicator = socket(client, "page=overview")
    assert (await communicator.connect())[0]  # Channels' session middleware read the hashed row
    assert await communicator.receive_nothing(timeout=1.3)
    await sync_to_async(HashedSession.objects.all().delete)()  # signed out elsewhere (or by an admin)
    assert await closed_with(communicator, timeout=3) == 4401
