"""HMAC-sealed opaque strings: MRTR `requestState` and `tools/list` cursors."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

_VERSION = "v1"


class InvalidToken(Exception):
    pass


class Signer:
    """Seals small JSON payloads as `v1.<payload>.<sig>`.

    The key is random per process: a restart invalidates every outstanding token,
    which is what a client must cope with anyway (PROTOCOL.md §4.2).
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def seal(self, purpose: str, payload: dict[str, Any], ttl_seconds: float) -> str:
        body = {"p": purpose, "exp": time.time() + ttl_seconds, "d": payload}
        encoded = _b64(json.dumps(body, separators=(",", ":")).encode("utf-8"))
        return f"{_VERSION}.{encoded}.{self._sign(encoded)}"

    def open(self, purpose: str, token: Any) -> dict[str, Any]:
        """Returns the payload, or raises InvalidToken if forged, expired or meant elsewhere."""
        if not isinstance(token, str) or not token.isascii():
            raise InvalidToken("not an ASCII string")
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != _VERSION:
            raise InvalidToken("bad format")
        _, encoded, signature = parts
        if not hmac.compare_digest(signature, self._sign(encoded)):
            raise InvalidToken("bad signature")
        body = json.loads(_unb64(encoded))
        if body.get("p") != purpose or not isinstance(body.get("d"), dict):
            raise InvalidToken("wrong purpose")
        if body.get("exp", 0) < time.time():
            raise InvalidToken("expired")
        payload: dict[str, Any] = body["d"]
        return payload

    def _sign(self, encoded: str) -> str:
        return _b64(hmac.new(self._key, encoded.encode("ascii"), hashlib.sha256).digest())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken("bad base64") from exc
