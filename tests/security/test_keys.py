"""Encryption keys: HKDF, fallback keys, rekey, a deploy check, no 500 on a wrong key."""

import base64
import hashlib
import hmac
import io
import secrets
from collections.abc import Callable, Iterator

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from tasksapp.lib import crypto
from tasksapp.models import InputRequest, McpServer, RemoteTask
from tests.support.deploy import PRODUCTION, manage

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "old-key-" + "k" * 40 + "0123456789", "new-key-" + "n" * 40 + "abcdefghij"
TASK_ID, CREDENTIAL = "task-id-9f8e7d", "Bearer credential-wxyz"
UseKeys = Callable[..., None]


@pytest.fixture
def use_keys(settings: Settings) -> Iterator[UseKeys]:
    def use(current: str, *fallbacks: str) -> None:
        settings.DASHBOARD_ENCRYPTION_KEY = current
        settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS = list(fallbacks)
        crypto.reset()

    yield use
    crypto.reset()


def operator() -> Client:
    user = User.objects.create_user("otto", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


def stored() -> tuple[McpServer, RemoteTask, InputRequest]:
    server = McpServer(name="srv", url="http://127.0.0.1:9/mcp")
    server.headers = {"Authorization": CREDENTIAL}
    server.save()
    task = RemoteTask(server=server, tool_name="slow", status="input_required")
    task.set_remote_id(TASK_ID)
    task.save()
    request = InputRequest(task=task, method="elicitation/create", params={"message": "?"})
    request.set_key("key-1")
    request.save()
    return server, task, request


def rekey() -> str:
    out = io.StringIO()
    call_command("rekey", stdout=out)
    return out.getvalue()


def test_a_rotated_key_keeps_everything_readable_and_findable_until_rekey(use_keys: UseKeys) -> None:
    use_keys(OLD)
    _, task, _ = stored()
    use_keys(NEW, OLD)
    client = operator()

    assert McpServer.objects.get().headers == {"Authorization": CREDENTIAL}
    found = client.post(reverse("tasks:find"), {"task_id": TASK_ID})
    assert found["Location"] == reverse("tasks:detail", args=[task.pk])
    assert InputRequest.objects.filter(key_hash__in=crypto.fingerprints("key-1")).exists()

    assert rekey().startswith("3 secrets rewritten under the current key, 0 already were.")
    assert rekey().startswith("0 secrets rewritten under the current key, 3 already were.")
    use_keys(NEW)  # the old key is no longer needed
    assert McpServer.objects.get().headers == {"Authorization": CREDENTIAL}
    assert RemoteTask.objects.get(remote_id_hash=crypto.fingerprint(TASK_ID)).remote_id == TASK_ID
    assert InputRequest.objects.get(key_hash=crypto.fingerprint("key-1")).key == "key-1"


def test_values_written_with_the_single_sha256_derivation_stay_readable(use_keys: UseKeys) -> None:
    use_keys(OLD)
    legacy = Fernet(
        base64.urlsafe_b64encode(hashlib.sha256(b"mcp-dashboard/fernet\0" + OLD.encode()).digest())
    )
    server = McpServer.objects.create(
        name="srv", url="http://127.0.0.1:9/mcp", headers_encrypted=legacy.encrypt(b'{"X-Key": "v"}').decode()
    )
    assert server.headers == {"X-Key": "v"} and not crypto.is_current(server.headers_encrypted)
    rekey()
    server.refresh_from_db()
    assert server.headers == {"X-Key": "v"} and crypto.is_current(server.headers_encrypted)
    hkdf = Fernet(base64.urlsafe_b64encode(crypto._hkdf(OLD.encode(), b"fernet")))
    assert hkdf.decrypt(server.headers_encrypted.encode()) == b'{"X-Key": "v"}'


def test_a_wrong_key_gives_clear_messages_never_a_500(use_keys: UseKeys) -> None:
    use_keys(OLD)
    _, task, request = stored()
    use_keys(NEW)
    client = operator()

    servers = client.get(reverse("tasks:servers"))
    assert servers.status_code == 200 and "unreadable: the encryption key changed" in servers.content.decode()
    raw = client.get(reverse("tasks:raw", args=[task.pk]))
    assert raw.status_code == 200 and raw.json()["taskId"] is None
    assert "DASHBOARD_ENCRYPTION_KEY_FALLBACKS" in raw.json()["taskIdUnreadable"]
    for url, body in (
        (reverse("tasks:cancel", args=[task.pk]), {}),
        (reverse("tasks:answer", args=[request.pk]), {"action": "decline"}),
    ):
        response = client.post(url, body)
        assert response.status_code == 503, url
        assert "A stored secret cannot be read" in response.content.decode()
        assert "manage.py rekey" in response.content.decode()
    with pytest.raises(CommandError, match="some secrets are unreadable"):
        rekey()
    task.refresh_from_db()
    assert task.cancel_requested_at is None


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"DASHBOARD_ENCRYPTION_KEY": ""}, "tasksapp.E001"),
        ({"DASHBOARD_ENCRYPTION_KEY": "x"}, "tasksapp.E002"),
        ({"DASHBOARD_ENCRYPTION_KEY": "ab" * 30}, "tasksapp.E002"),
        ({"DASHBOARD_ENCRYPTION_KEY": PRODUCTION["SECRET_KEY"]}, "tasksapp.W001"),
    ],
)
def test_check_deploy_demands_a_strong_key_of_its_own(env: dict[str, str], said: str) -> None:
    run = manage("check", "--deploy", "--fail-level", "WARNING", **{**PRODUCTION, **env})
    assert run.returncode == 1 and said in run.stderr, run.stderr


def test_a_strong_random_key_passes() -> None:
    run = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        **{**PRODUCTION, "DASHBOARD_ENCRYPTION_KEY": secrets.token_urlsafe(48)},
    )
    assert run.returncode == 0, run.stderr


def _signed_under_current_key(blocks: bytes) -> str:
    """A Fernet token whose HMAC is right under the current key around `blocks` as the padded
    plaintext, whatever they hold (Fernet itself always pads correctly)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = crypto._keyring()[0].fernet_key
    iv = secrets.token_bytes(16)
    encryptor = Cipher(algorithms.AES(key[16:]), modes.CBC(iv)).encryptor()
    body = b"\x80" + (1).to_bytes(8) + iv + encryptor.update(blocks) + encryptor.finalize()
    return base64.urlsafe_b64encode(body + hmac.digest(key[:16], body, "sha256")).decode()


def test_decrypt_many_reads_exactly_what_decrypt_reads(use_keys: UseKeys) -> None:
    """The export's batch decryption (one AES pass per key) against Fernet's own, token by token:
    current, fallback and single-SHA-256 keys, every plaintext length around the block size, and
    tokens that must not read (tampered anywhere, another key, truncated, not base64, empty)."""
    use_keys(OLD)
    old_tokens = [crypto.encrypt(f"old-{i}") for i in range(3)]
    legacy = Fernet(
        base64.urlsafe_b64encode(hashlib.sha256(b"mcp-dashboard/fernet\0" + OLD.encode()).digest())
    )
    legacy_tokens = [legacy.encrypt("légacy-ü".encode()).decode()]
    use_keys(NEW, OLD)
    texts = ["x" * size for size in range(34)] + ["tsk-4f0c2d9e", "日本語のタスク", secrets.token_urlsafe(48)]
    tokens = [crypto.encrypt(text) for text in texts] + old_tokens + legacy_tokens
    raw = base64.urlsafe_b64decode(tokens[20])
    tampered = [
        base64.urlsafe_b64encode(raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]).decode()
        for at in (0, 5, 12, 30, len(raw) - 40, len(raw) - 1)
    ]
    stranger = Fernet(Fernet.generate_key()).encrypt(b"not ours").decode()
    # signed under the current key, so only the padding or the text can refuse them
    signed = [
        _signed_under_current_key(body)
        for body in (b"x" * 16, b"x" * 15 + b"\x00", b"x" * 13 + b"\x01\x02\x03", b"\xff\xfe" + b"\x0e" * 14)
    ]
    unreadable = [*tampered, stranger, *signed, tokens[3][:-8], "not base64 !!", "é" + tokens[5][1:], ""]
    mixed = [*tokens, *unreadable, tokens[0]]

    def one(token: str) -> str | None:
        try:
            return crypto.decrypt(token)
        except crypto.SecretUnreadable:
            return None

    expected = [one(token) for token in mixed]
    assert expected[: len(texts)] == texts and expected[len(tokens) : -1] == [None] * len(unreadable)
    assert crypto.decrypt_many(mixed) == expected
    assert crypto.decrypt_many([]) == []
