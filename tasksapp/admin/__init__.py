"""The admin site for administrators. Mirrored data is read-only; actions go through the services.
Django's autodiscovery imports this package: each part registers its own models."""

from tasksapp.admin import mirror, notify  # noqa: F401
