"""Login throttling: per (account, address) pair, with limits ten times
higher per account and per address, on /login/ and /admin/login/."""

import logging

import pytest
from axes.models import AccessFailureLog
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "the-right-password-1"


@pytest.fixture(autouse=True)
def _fast_hashing(settings: SettingsWrapper) -> None:
    """What is tested is the counting, not the hashing: a cheap hasher keeps 60 logins quick."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password=PASSWORD, is_staff=True, is_superuser=True)


def log_in(
    client: Client, username: str, password: str, *, path: str = "/login/", address: str = "127.0.0.1"
):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_sixty_wrong_passwords_then_the_right_one_is_refused(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client()
    caplog.set_level(logging.WARNING, logger="axes")
    for _ in range(60):
        log_in(client, "alice", "guess")
    response = log_in(client, "alice", PASSWORD)

    assert response.status_code == 429 and not logged_in(client)
    page = response.content.decode()
    assert "Too many failed logins" in page and "paused for 15 minutes" in page
    assert "axes_reset_username" in page
    assert AccessFailureLog.objects.filter(username="alice").count() >= 5
    assert any("alice" in record.getMessage() for record in caplog.records)


def test_guessing_from_one_address_locks_that_account_there_only(alice: User) -> None:
    for _ in range(5):
        log_in(Client(), "alice", "guess", address="203.0.113.9")
    assert log_in(Client(), "alice", PASSWORD, address="203.0.113.9").status_code == 429
    owner = Client()  # the admin herself, from her own address, is not locked out
    assert log_in(owner, "alice", PASSWORD, address="198.51.100.7").status_code == 302 and logged_in(owner)
    User.objects.create_user("bob", password=PASSWORD)
    assert (
        log_in(Client(), "bob", PASSWORD, address="203.0.113.9").status_code == 302
    )  # the address is not locked


def test_the_account_wide_limit_is_ten_times_higher(alice: User) -> None:
    for n in range(49):  # 49 addresses, one guess each: under every limit
        log_in(Client(), "alice", "guess", address=f"192.0.2.{n + 1}")
    assert log_in(Client(), "alice", PASSWORD, address="198.51.100.7").status_code == 302
    for n in range(50):
        log_in(Client(), "alice", "guess", address=f"192.0.2.{n + 1}")
    refused = log_in(Client(), "alice", PASSWORD, address="198.51.100.8")
    assert refused.status_code == 429 and "50 for the account from anywhere" in refused.content.decode()


def test_the_address_wide_limit_is_ten_times_higher(alice: User) -> None:
    for n in range(50):  # one address, fifty accounts
        log_in(Client(), f"nobody-{n}", "guess", address="203.0.113.9")
    assert log_in(Client(), "alice", PASSWORD, address="203.0.113.9").status_code == 429
    assert log_in(Client(), "alice", PASSWORD, address="203.0.113.10").status_code == 302


def test_the_admin_login_is_throttled_too(alice: User) -> None:
    client = Client()
    for _ in range(5):
        log_in(client, "alice", "guess", path="/admin/login/")
    response = log_in(client, "alice", PASSWORD, path="/admin/login/")
    assert response.status_code == 429 and "Too many failed logins" in response.content.decode()
    assert log_in(Client(), "alice", PASSWORD, path="/admin/login/", address="192.0.2.99").status_code == 302


def test_the_owner_logging_in_does_not_reset_someone_elses_guesses(alice: User) -> None:
    for _ in range(4):
        log_in(Client(), "alice", "guess", address="203.0.113.9")
    assert log_in(Client(), "alice", PASSWORD, address="198.51.100.7").status_code == 302
    log_in(Client(), "alice", "guess", address="203.0.113.9")  # the fifth from there
    assert log_in(Client(), "alice", PASSWORD, address="203.0.113.9").status_code == 429


def test_many_right_logins_and_a_few_typos_never_lock(alice: User) -> None:
    for _ in range(12):  # more than twice the limit of 5
        client = Client()
        log_in(client, "alice", "typo")
        assert log_in(client, "alice", PASSWORD).status_code == 302 and logged_in(client)
