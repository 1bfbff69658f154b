"""Which language a page is in: the user's setting, else the switch's cookie, else Accept-Language.

Django's LocaleMiddleware reads the cookie and Accept-Language before the user is known (it must
run before CommonMiddleware, and authentication runs later). The user's own setting, once the
preferences model exists (`request.user.preference.language`, empty meaning "follow the
browser"), is applied in `process_view`, which runs after every `process_request`, so the view,
its messages and its template are all in that language.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django.utils.translation.trans_real import get_supported_language_variant, parse_accept_lang_header
from django.views.decorators.http import require_POST
from django.views.i18n import set_language


def preferred(user: Any) -> str:
    """The language code the user chose in their preferences, or "" (none chosen, or no preferences)."""
    if not getattr(user, "is_authenticated", False):
        return ""
    prefs = getattr(user, "preference", None)  # a missing one-to-one row raises AttributeError: ""
    code = getattr(prefs, "language", "") or ""
    return code if translation.check_for_language(code) and code in dict(settings.LANGUAGES) else ""


def for_scope(scope: dict[str, Any]) -> str:
    """The language a websocket's page was rendered in, by the same rules as the page (user's
    setting, the switch's cookie, Accept-Language, LANGUAGE_CODE), for the live layer's renders.
    Runs in a database thread (the user's setting is a row)."""
    code = preferred(scope.get("user"))
    if code:
        return code
    cookie = scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME, "")
    headers = dict(scope.get("headers", []))
    accepted = [cookie] + [
        lang for lang, _q in parse_accept_lang_header(headers.get(b"accept-language", b"").decode("latin-1"))
    ]
    for candidate in accepted:
        if not candidate or candidate == "*":
            continue
        try:
            return get_supported_language_variant(candidate)
        except LookupError:
            continue
    return str(settings.LANGUAGE_CODE)


class LanguageMiddleware(LocaleMiddleware):
    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        code = preferred(getattr(request, "user", None))
        if code and code != translation.get_language():
            translation.activate(code)
            request.LANGUAGE_CODE = code
        return None


@login_not_required
@require_POST
def switch(request: HttpRequest) -> HttpResponse:
    """Django's set_language (a POST with CSRF, no JavaScript; sets the language cookie), which also
    saves the choice as the user's setting when they have one, so the two never disagree."""
    response = set_language(request)
    code = request.POST.get("language", "")
    prefs = getattr(request.user, "preference", None) if request.user.is_authenticated else None
    if prefs is not None and hasattr(prefs, "language") and code in dict(settings.LANGUAGES):
        prefs.language = code
        prefs.save(update_fields=["language"])
    return response
