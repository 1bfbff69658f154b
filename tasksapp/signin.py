"""Who a request is signed in as, read once per request as Django does, with the read compiled once
per thread (AUTHENTICATION_BACKENDS names `tasksapp.signin.Backend`).

Every signed-in page and socket reads its user's row; Django's ModelBackend builds and compiles
that query each time, which was a measurable part of a small page (docs/benchmarks.md, *Pages
nearer their SQL*). This backend is ModelBackend with the read prepared (tasksapp/lib/prepared.py).

ModelBackend stays listed after it, so a session signed in before this backend existed (the
session names the backend that signed it in) is still read, not signed out. A password this
backend refuses stops there (PermissionDenied: Django then reports the failure, and django-axes
counts it, as for any refusal), so a wrong password is hashed once, not once per backend.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from tasksapp.lib.prepared import Prepared

_user: Prepared[Any] = Prepared(lambda pk: get_user_model()._default_manager.filter(pk=pk), 1)


class Backend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            raise PermissionDenied  # not ModelBackend again with the same password
        return user

    def get_user(self, user_id: Any) -> Any:
        try:
            pk = int(user_id)
        except (TypeError, ValueError):
            return None
        user = _user.first(pk)
        return user if user is not None and self.user_can_authenticate(user) else None
