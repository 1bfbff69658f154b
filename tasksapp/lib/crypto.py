"""Secrets at rest: server auth headers, remote task ids, input-request keys and requestState.

Values are encrypted with Fernet under keys derived (HKDF-SHA256) from DASHBOARD_ENCRYPTION_KEY,
or from SECRET_KEY when that is unset. Older keys stay readable: DASHBOARD_ENCRYPTION_KEY_FALLBACKS
(or SECRET_KEY_FALLBACKS, when the key comes from SECRET_KEY) and the single-SHA-256 derivation
used before HKDF. Everything is written under the current key; `manage.py rekey` rewrites what
was written under an older one. Lookups use a keyed fingerprint, so no plaintext id is stored;
a value is looked up under its fingerprint for every key (see fingerprints()).
"""

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_SALT = b"mcp-tasks-dashboard/v2"
UNREADABLE = (
    "a stored secret cannot be decrypted with the configured keys: DASHBOARD_ENCRYPTION_KEY (or "
    "SECRET_KEY) changed without the old value in DASHBOARD_ENCRYPTION_KEY_FALLBACKS; see docs/security.md"
)


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted: the encryption key changed since it was written."""


@dataclass(frozen=True)
class _Key:
    fernet: Fernet
    fingerprint_key: bytes
    fernet_key: bytes  # Fernet's 32 bytes: the HMAC signing key, then the AES key


def _hkdf(material: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=purpose).derive(material)


def _derived(material: str) -> _Key:
    raw = material.encode()
    fernet_key = _hkdf(raw, b"fernet")
    return _Key(Fernet(base64.urlsafe_b64encode(fernet_key)), _hkdf(raw, b"fingerprint"), fernet_key)


def _legacy(material: str) -> _Key:
    """The derivation before HKDF (one SHA-256), kept so values written then stay readable."""
    raw = material.encode()
    fernet_key = hashlib.sha256(b"mcp-dashboard/fernet\0" + raw).digest()
    return _Key(
        Fernet(base64.urlsafe_b64encode(fernet_key)),
        hashlib.sha256(b"mcp-dashboard/fingerprint\0" + raw).digest(),
        fernet_key,
    )


def key_materials() -> list[str]:
    """The configured key material, current first, then the fallbacks in the order given."""
    if settings.DASHBOARD_ENCRYPTION_KEY:
        return [settings.DASHBOARD_ENCRYPTION_KEY, *settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS]
    return [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS, *settings.DASHBOARD_ENCRYPTION_KEY_FALLBACKS]


@cache
def _keyring() -> tuple[_Key, ...]:
    materials = list(dict.fromkeys(key_materials()))
    return (*(_derived(m) for m in materials), *(_legacy(m) for m in materials))


@cache
def _multi() -> MultiFernet:
    return MultiFernet([key.fernet for key in _keyring()])


def reset() -> None:
    """Forget the derived keys (after the settings changed, e.g. in tests)."""
    _keyring.cache_clear()
    _multi.cache_clear()


def encrypt(plaintext: str) -> str:
    return _multi().encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _multi().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise SecretUnreadable(UNREADABLE) from None


def decrypt_many(tokens: Sequence[str]) -> list[str | None]:
    """decrypt() of each token, None for one no key reads: the same Fernet checks (version byte,
    HMAC-SHA256 over the token under each key in turn, then PKCS7 padding), but one AES pass for all
    the tokens under each key. Fernet builds cipher, HMAC and unpadder objects per token, which cost
    an export about 30 us a row; here each token's CBC chain is undone by hand over one ECB pass (a
    plaintext block is the ECB decryption of its ciphertext block XOR the block before, the IV first).
    """
    keys = _keyring()
    found: dict[int, list[tuple[int, bytes]]] = {}
    for at, token in enumerate(tokens):
        try:
            data = base64.urlsafe_b64decode(token)
        except (ValueError, binascii.Error):
            continue
        # version 0x80, an 8-byte time, a 16-byte IV, whole 16-byte blocks (at least one), the HMAC
        if len(data) < 73 or data[0] != 0x80 or (len(data) - 57) % 16:
            continue
        for index, key in enumerate(keys):
            signature = hmac.digest(key.fernet_key[:16], data[:-32], "sha256")
            if hmac.compare_digest(signature, data[-32:]):
                found.setdefault(index, []).append((at, data))
                break
    plain: list[str | None] = [None] * len(tokens)
    for index, batch in found.items():
        cbc_undone_by_hand = modes.ECB()  # noqa: S305 (decrypts only: the chain is undone below)
        decryptor = Cipher(algorithms.AES(keys[index].fernet_key[16:]), cbc_undone_by_hand).decryptor()
        blocks = decryptor.update(b"".join(data[25:-32] for _, data in batch)) + decryptor.finalize()
        offset = 0
        for at, data in batch:
            chain = data[9:-32]  # the IV, then the ciphertext blocks
            size = len(chain) - 16
            decrypted = int.from_bytes(blocks[offset : offset + size]) ^ int.from_bytes(chain[:size])
            padded, offset = decrypted.to_bytes(size), offset + size
            pad = padded[-1]
            if not 1 <= pad <= 16 or padded[-pad:] != bytes([pad]) * pad:
                continue
            try:
                plain[at] = padded[:-pad].decode()
            except UnicodeDecodeError:
                continue
    return plain


def is_current(token: str) -> bool:
    """True when the token was written under the current key (nothing for rekey to do)."""
    try:
        _keyring()[0].fernet.decrypt(token.encode("ascii"))
    except (InvalidToken, ValueError):
        return False
    return True


def fingerprint(value: str) -> str:
    """A stable keyed hash for finding a row by a secret without storing the secret (current key)."""
    return _fingerprint(_keyring()[0], value)


def fingerprints(value: str) -> list[str]:
    """The value's fingerprint under every key, current first: a row written before a key change
    (and not yet rewritten by `manage.py rekey`) is found by one of these."""
    return [_fingerprint(key, value) for key in _keyring()]


def stored_fingerprints(values: Iterable[str], stored: Iterable[str]) -> dict[str, str]:
    """For each value, the fingerprint it has among `stored` (under whichever key), else the current one."""
    known = set(stored)
    found = {}
    for value in values:
        candidates = fingerprints(value)
        found[value] = next((each for each in candidates if each in known), candidates[0])
    return found


def _fingerprint(key: _Key, value: str) -> str:
    return hmac.new(key.fingerprint_key, value.encode(), hashlib.sha256).hexdigest()


def mask(value: str, *, keep: int = 4) -> str:
    """Show a secret as its last few characters only: 'Bearer abcd…' becomes '••••…wxyz'."""
    if len(value) <= keep * 2:
        return "•" * 8
    return "•" * 8 + value[-keep:]
