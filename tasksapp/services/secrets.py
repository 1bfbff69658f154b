"""Re-encrypting every stored secret under the current key (after a key change; see docs/security.md)."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from tasksapp.lib import crypto

BATCH = 500

# model name -> (encrypted column, fingerprint column or None)
SECRET_COLUMNS = {
    "McpServer": ("headers_encrypted", None),
    "RemoteTask": ("remote_id_encrypted", "remote_id_hash"),
    "InputRequest": ("key_encrypted", "key_hash"),
    "PendingCall": ("request_state_encrypted", None),
}
# Models added after migration 0004, which rekeys the ones above with its historical models.
LATER_SECRET_COLUMNS = {
    "ServerAuthorization": ("secrets_encrypted", None),  # OAuth tokens and client credentials (0007)
}


@dataclass
class RekeyReport:
    rewritten: int = 0
    current: int = 0
    unreadable: dict[str, list[int]] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.rewritten} secrets rewritten under the current key, {self.current} already were."]
        for model, pks in self.unreadable.items():
            shown = ", ".join(str(pk) for pk in pks[:20]) + (" …" if len(pks) > 20 else "")
            lines.append(f"{len(pks)} {model} rows cannot be decrypted with any configured key: {shown}")
        return "\n".join(lines)


def secrets_rekey(*, models: dict[str, Any] | None = None) -> RekeyReport:
    """Rewrite every secret not written under the current key, with its fingerprint; a no-op when
    all are current. `models` lets a migration pass its historical models."""
    columns = SECRET_COLUMNS
    if models is None:
        from tasksapp import models as app_models

        columns = {**SECRET_COLUMNS, **LATER_SECRET_COLUMNS}
        models = {name: getattr(app_models, name) for name in columns}
    crypto.reset()
    report = RekeyReport()
    for name, (column, hash_column) in columns.items():
        for batch in _batches(models[name], column):
            _rekey_batch(models[name], batch, column, hash_column, report)
    return report


def _batches(model: Any, column: str) -> Iterator[list[Any]]:
    last = 0
    while True:
        rows = list(model.objects.filter(pk__gt=last).exclude(**{column: ""}).order_by("pk")[:BATCH])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def _rekey_batch(
    model: Any, rows: list[Any], column: str, hash_column: str | None, report: RekeyReport
) -> None:
    changed = []
    for row in rows:
        token = getattr(row, column)
        if crypto.is_current(token):  # written with its fingerprint, under the same key
            report.current += 1
            continue
        try:
            plain = crypto.decrypt(token)
        except crypto.SecretUnreadable:
            report.unreadable.setdefault(model.__name__, []).append(row.pk)
            continue
        setattr(row, column, crypto.encrypt(plain))
        if hash_column is not None:
            setattr(row, hash_column, crypto.fingerprint(plain))
        changed.append(row)
    fields = [column] if hash_column is None else [column, hash_column]
    with transaction.atomic():
        model.objects.bulk_update(changed, fields)
    report.rewritten += len(changed)
