"""Which language a page is in: the user's setting, else the switch's cookie, else Accept-Language.

Django's LocaleMiddleware reads the cookie and Accept-Language; tasksapp.middleware.LanguageMiddleware
then applies the user's own setting (preferences page, tasksapp/prefs.py; empty means "follow the
browser"). Here: the rules themselves, the live layer's language, and the switch's view.
docs/operator.md "Language".
"""

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.utils.translation.trans_real import get_supported_language_variant, parse_accept_lang_header
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from tasksapp import prefs
from tasksapp.models import UserPreference


def usable(code: str | None) -> str:
    """`code` if it is one of LANGUAGES, else ""."""
    return code if code and code in dict(settings.LANGUAGES) else ""


def for_scope(scope: dict[str, Any]) -> str:
    """The language a websocket's page was rendered in, by the same rules as the page (user's
    setting, the switch's cookie, Accept-Language, LANGUAGE_CODE), for the live layer's renders.
    Runs in a database thread (the user's setting is a row)."""
    user: Any = scope.get("user")
    if getattr(user, "is_authenticated", False):
        chosen = UserPreference.objects.filter(user_id=user.pk).values_list("language", flat=True)
        code = usable(chosen.first())
        if code:
            return code
    cookie = scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME, "")
    header = dict(scope.get("headers", [])).get(b"accept-language", b"").decode("latin-1")
    for candidate in [cookie] + [code for code, _q in parse_accept_lang_header(header)]:
        if not candidate or candidate == "*":
            continue
        try:
            return get_supported_language_variant(candidate)
        except LookupError:
            continue
    return str(settings.LANGUAGE_CODE)


@login_not_required
@require_POST
def switch(request: HttpRequest) -> HttpResponse:
    """Django's set_language (a POST with CSRF, no JavaScript; sets the language cookie). For a user
    who chose a language in their preferences, the switch changes that choice too (else the
    setting, which outranks the cookie, would undo the switch on the next page)."""
    response = set_language(request)
    code = usable(request.POST.get("language"))
    preference = prefs.preference_of(request) if request.user.is_authenticated else None
    if code and preference is not None and preference.language:
        prefs.preference_set(user=request.user, language=code)
    return response
