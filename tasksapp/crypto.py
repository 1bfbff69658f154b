"""Secrets at rest: server auth headers, remote task ids and input-request keys.

Values are encrypted with Fernet under a key derived from DASHBOARD_ENCRYPTION_KEY (or, when
that is unset, SECRET_KEY). Lookups use a keyed fingerprint, so no plaintext id is ever stored.
"""

import base64
import hashlib
import hmac
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted: the encryption key changed since it was written."""


@cache
def _keys() -> tuple[Fernet, bytes]:
    material = (settings.DASHBOARD_ENCRYPTION_KEY or settings.SECRET_KEY).encode()
    fernet_key = hashlib.sha256(b"mcp-dashboard/fernet\0" + material).digest()
    hmac_key = hashlib.sha256(b"mcp-dashboard/fingerprint\0" + material).digest()
    return Fernet(base64.urlsafe_b64encode(fernet_key)), hmac_key


def encrypt(plaintext: str) -> str:
    return _keys()[0].encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _keys()[0].decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise SecretUnreadable(
            "a stored secret cannot be decrypted; was DASHBOARD_ENCRYPTION_KEY or SECRET_KEY changed?"
        ) from None


def fingerprint(value: str) -> str:
    """A stable keyed hash for finding a row by a secret without storing the secret."""
    return hmac.new(_keys()[1], value.encode(), hashlib.sha256).hexdigest()


def mask(value: str, *, keep: int = 4) -> str:
    """Show a secret as its last few characters only: 'Bearer abcd…' becomes '••••…wxyz'."""
    if len(value) <= keep * 2:
        return "•" * 8
    return "•" * 8 + value[-keep:]
