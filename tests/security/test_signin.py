"""Who a request is signed in as (tasksapp/signin.py): a sign-in goes through the dashboard's backend,
a session signed in by Django's ModelBackend before it still works, a wrong password is hashed once
(not once per backend), a deactivated account is signed out, and a refusal is still counted."""

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import Group, User
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "the-right-password-1"
HASHED: list[str] = []  # what the counting hasher was asked to do


class CountingHasher(MD5PasswordHasher):
    """MD5 (quick), noting each password it hashes: checked (verify) or hashed to keep the time of
    an unknown name (encode; verify's own encode is not counted again)."""

    algorithm = "counted_md5"
    verifying = False

    def encode(self, password: str, salt: str) -> str:
        if not self.verifying:
            HASHED.append("encode")
        return super().encode(password, salt)

    def verify(self, password: str, encoded: str) -> bool:
        HASHED.append("verify")
        self.verifying = True
        try:
            return super().verify(password, encoded)
        finally:
            self.verifying = False


@pytest.fixture(autouse=True)
def _counted(settings: SettingsWrapper) -> None:
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]


@pytest.fixture
def alice() -> User:
    user = User.objects.create_user("alice", password=PASSWORD)
    user.groups.add(Group.objects.get(name="viewer"))
    return user


def test_a_sign_in_goes_through_the_dashboards_backend(alice: User) -> None:
    client = Client()
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    assert client.session[BACKEND_SESSION_KEY] == "tasksapp.signin.Backend"
    assert client.get("/tasks/").status_code == 200


def test_a_session_signed_in_by_modelbackend_before_still_works(alice: User) -> None:
    client = Client()
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/tasks/").status_code == 200
    assert client.session[BACKEND_SESSION_KEY] == "django.contrib.auth.backends.ModelBackend"


@pytest.mark.parametrize("username", ["alice", "nobody"])
def test_a_wrong_password_is_hashed_once_and_counted(alice: User, username: str) -> None:
    HASHED.clear()
    refused = Client().post("/login/", {"username": username, "password": "wrong"})
    assert refused.status_code == 200 and "_auth_user_id" not in refused.client.session
    assert len(HASHED) == 1, HASHED  # one backend checked it (an unknown name is hashed to keep the time)
    assert AccessAttempt.objects.get(username=username).failures_since_start == 1


def test_a_deactivated_account_is_signed_out_at_its_next_request(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    assert client.session[BACKEND_SESSION_KEY] == "tasksapp.signin.Backend"
    assert client.get("/tasks/").status_code == 200
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert client.get("/tasks/").status_code == 302
