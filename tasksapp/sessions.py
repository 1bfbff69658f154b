"""Sessions stored under a keyed hash of their key: a copy of the database is not a login.

Django's database store keeps each session key (the `sessionid` cookie's value) in clear, so a
stolen database file or backup held a working cookie for every signed-in person for two weeks.
This store (SESSION_ENGINE = "tasksapp.sessions") is Django's, except that the row's primary key
is crypto.fingerprint(key): HMAC-SHA256 under a key derived from DASHBOARD_ENCRYPTION_KEY (or
SECRET_KEY), which is not in the database. A session is looked up under its fingerprint for every
configured key (crypto.fingerprints), and stays under the one it was found with, so rotating the
key with the old one in the fallbacks signs nobody out. Everything else (expiry, cycling the key
at login, clearsessions, Channels' session middleware on the live socket) is Django's.
"""

from typing import Any

from django.contrib.sessions.backends import db
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models
from django.utils import timezone

from tasksapp.lib import crypto
from tasksapp.lib.prepared import Prepared


class HashedSession(AbstractBaseSession):
    """A session row: the key's fingerprint, never the key itself."""

    session_key = models.CharField("session key fingerprint", max_length=64, primary_key=True)

    class Meta(AbstractBaseSession.Meta):
        app_label = "tasksapp"
        db_table = "tasksapp_session"

    @classmethod
    def get_session_store_class(cls) -> type["SessionStore"]:
        return SessionStore


_LIVE_ROWS: dict[int, Prepared[HashedSession]] = {}


def _live_row(keys: int) -> Prepared[HashedSession]:
    """The session row under any of `keys` fingerprints, if it has not expired (one query shape per
    number of configured keys)."""
    found = _LIVE_ROWS.get(keys)
    if found is None:

        def make(*values: Any) -> Any:
            *fingerprints, now = values
            rows = HashedSession.objects.filter(session_key__in=fingerprints, expire_date__gt=now)
            return rows.order_by("pk")[:1]

        found = _LIVE_ROWS.setdefault(keys, Prepared(make, keys + 1))
    return found


class SessionStore(db.SessionStore):
    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        self._found: tuple[str, str] | None = None  # (session key, the fingerprint its row has)

    @classmethod
    def get_model_class(cls) -> type[HashedSession]:
        return HashedSession

    def _row_key(self, session_key: str) -> str:
        """The fingerprint to write `session_key` under: the one its row was found with, else current."""
        if self._found is not None and self._found[0] == session_key:
            return self._found[1]
        return crypto.fingerprint(session_key)

    def _rows(self, session_key: str) -> Any:
        """The rows of `session_key`: under its fingerprint for each configured key."""
        return self.model.objects.filter(session_key__in=crypto.fingerprints(session_key))

    def _live(self) -> Any:
        return self._rows(self.session_key or "").filter(expire_date__gt=timezone.now())

    def _get_session_from_db(self) -> HashedSession | None:
        # Every signed-in request reads its session: compiled once per thread (tasksapp/lib/prepared.py).
        keys = crypto.fingerprints(self.session_key or "")
        row: HashedSession | None = _live_row(len(keys)).first(*keys, timezone.now())
        self._remember(row)
        return row

    async def _aget_session_from_db(self) -> HashedSession | None:
        row: HashedSession | None = await self._live().afirst()
        self._remember(row)
        return row

    def _remember(self, row: HashedSession | None) -> None:
        if row is None:
            self._session_key = None
        elif self.session_key is not None:
            self._found = (self.session_key, row.session_key)

    def exists(self, session_key: str) -> bool:
        return bool(self._rows(session_key).exists())

    async def aexists(self, session_key: str) -> bool:
        return bool(await self._rows(session_key).aexists())

    def create_model_instance(self, data: dict[str, Any]) -> HashedSession:
        return HashedSession(
            session_key=self._row_key(self._get_or_create_session_key()),  # type: ignore[attr-defined]
            session_data=self.encode(data),
            expire_date=self.get_expiry_date(),
        )

    async def acreate_model_instance(self, data: dict[str, Any]) -> HashedSession:
        return HashedSession(
            session_key=self._row_key(await self._aget_or_create_session_key()),  # type: ignore[attr-defined]
            session_data=self.encode(data),
            expire_date=await self.aget_expiry_date(),
        )

    def delete(self, session_key: str | None = None) -> None:
        key = session_key if session_key is not None else self.session_key
        if key is not None:
            self._rows(key).delete()

    async def adelete(self, session_key: str | None = None) -> None:
        key = session_key if session_key is not None else self.session_key
        if key is not None:
            await self._rows(key).adelete()
