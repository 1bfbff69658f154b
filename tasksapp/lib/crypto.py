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
    _signer.cache_clear()


def encrypt(plaintext: str) -> str:
    return _multi().encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _multi().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise SecretUnreadable(UNREADABLE) from None


def decrypt_many(tokens: Sequence[str]) -> list[str | None]:
    """decrypt() of each token, None for one no key reads: the same Fernet checks (version byte,
    HMAC-SHA256 over the token under each key in turn, then PKCS7 padding), without Fernet's
    objects per token, which cost an export about 30 us a row (bench/export.py):

    - base64 straight through binascii (the bytes translated from the URL-safe alphabet);
    - the HMAC from the key's inner and outer SHA-256 states, computed once (RFC 2104), copied per token;
    - one AES-CBC pass per key over every token's IV and ciphertext laid end to end, from a zero IV:
      a ciphertext block comes out as the decryption of itself XOR the block before it, which is
      its own token's IV or previous block, as CBC wants; the block that comes out at each IV is
      not plaintext and is skipped.
    """
    keys = _keyring()
    signers = [_signer(key.fernet_key[:16]) for key in keys]
    found: dict[int, list[tuple[int, bytes]]] = {}
    for at, token in enumerate(tokens):
        try:
            data = binascii.a2b_base64(token.encode("ascii").translate(_FROM_URLSAFE))
        except (ValueError, binascii.Error):  # UnicodeEncodeError is a ValueError
            continue
        # version 0x80, an 8-byte time, a 16-byte IV, whole 16-byte blocks (at least one), the HMAC
        if len(data) < 73 or data[0] != 0x80 or (len(data) - 57) % 16:
            continue
        signed, signature = data[:-32], data[-32:]
        for index, (inner, outer) in enumerate(signers):
            digest = inner.copy()
            digest.update(signed)
            outer_digest = outer.copy()
            outer_digest.update(digest.digest())
            if hmac.compare_digest(outer_digest.digest(), signature):
                found.setdefault(index, []).append((at, data))
                break
    plain: list[str | None] = [None] * len(tokens)
    for index, batch in found.items():
        cipher = Cipher(algorithms.AES(keys[index].fernet_key[16:]), modes.CBC(bytes(16)))
        decryptor = cipher.decryptor()
        blocks = decryptor.update(b"".join(data[9:-32] for _, data in batch)) + decryptor.finalize()
        offset = 0
        for at, data in batch:
            size = len(data) - 41  # the IV and the ciphertext blocks
            padded, offset = blocks[offset + 16 : offset + size], offset + size
            pad = padded[-1]
            if not 1 <= pad <= 16 or padded[-pad:] != bytes([pad]) * pad:
                continue
            try:
                plain[at] = padded[:-pad].decode()
            except UnicodeDecodeError:
                continue
    return plain


_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


@cache
def _signer(signing_key: bytes) -> tuple["hashlib._Hash", "hashlib._Hash"]:
    """HMAC-SHA256's inner and outer hash states for a key of at most 64 bytes (RFC 2104)."""
    padded = signing_key.ljust(64, b"\0")
    return (
        hashlib.sha256(bytes(byte ^ 0x36 for byte in padded)),
        hashlib.sha256(bytes(byte ^ 0x5C for byte in padded)),
    )


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
