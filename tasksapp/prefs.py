"""Each person's display preferences, read: time zone, theme and language (the rows are
tasksapp.models.UserPreference), and the context processor base.html reads them from. The writes
are tasksapp.services.prefs; the pages (preferences, the theme button, the language switch)
tasksapp.views.prefs; tasksapp.middleware applies the zone and the language.

The zone a page is rendered in is, in order: the zone the user chose on the preferences page, the
browser's own zone (app.js reads it with Intl and keeps it in the `tz` cookie), settings.TIME_ZONE.
The theme is "auto" (follow prefers-color-scheme), "light" or "dark". The language is the user's
setting ("" = follow the browser), else the switch's cookie, else Accept-Language: Django's
LocaleMiddleware reads the cookie and Accept-Language, tasksapp.middleware.LanguageMiddleware then
applies the setting. docs/operator.md "Language".
"""

import functools
import zoneinfo
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.http import HttpRequest
from django.utils.translation.trans_real import get_supported_language_variant, parse_accept_lang_header

from tasksapp.lib.prepared import Prepared
from tasksapp.models import UserPreference

ZONE_COOKIE = "tz"
_ATTRIBUTE = "_tasksapp_preference"


@functools.cache
def zone_names() -> frozenset[str]:
    """Every IANA zone this machine knows (a cookie or a form may name only these)."""
    return frozenset(zoneinfo.available_timezones())


def valid_zone(name: str | None) -> str | None:
    """`name` if it is a zone this machine knows ("Asia%2FShanghai" from a cookie counts), else None."""
    name = unquote(name) if name else name
    return name if name and name in zone_names() else None


def preference_of(request: HttpRequest) -> UserPreference | None:
    """The signed-in user's preferences (read once per request), None for anonymous visitors."""
    if not hasattr(request, _ATTRIBUTE):
        user = getattr(request, "user", None)
        found = None
        if user is not None and user.is_authenticated:
            found = _preference.first(user.pk)
        setattr(request, _ATTRIBUTE, found)
    preference: UserPreference | None = getattr(request, _ATTRIBUTE)
    return preference


# Every page reads it: compiled once per thread (tasksapp/lib/prepared.py).
_preference = Prepared(lambda user_id: UserPreference.objects.filter(user_id=user_id).order_by("pk")[:1], 1)


def remember(request: HttpRequest, preference: UserPreference) -> None:
    setattr(request, _ATTRIBUTE, preference)


def zone_for(preference: UserPreference | None, cookie: str | None) -> tuple[str, str]:
    """(zone name, where it came from: "chosen", "browser" or "server")."""
    if preference is not None and valid_zone(preference.time_zone):
        return preference.time_zone, "chosen"
    if browser := valid_zone(cookie):
        return browser, "browser"
    return settings.TIME_ZONE, "server"


def user_zone(user: Any) -> str:
    """The zone to render for `user` outside a request (e.g. a live frame): chosen, else the server's."""
    pk = getattr(user, "pk", None)
    if pk is None:
        return str(settings.TIME_ZONE)
    chosen = UserPreference.objects.filter(user_id=pk).values_list("time_zone", flat=True).first()
    return valid_zone(chosen) or settings.TIME_ZONE


def zone_for_scope(scope: dict[str, Any]) -> str:
    """The zone a websocket's page was rendered in, by the page's rules (chosen, the browser's
    cookie, the server's), so that live fragments say the same times as the page. Runs in a
    database thread (the choice is a row)."""
    user = scope.get("user")
    preference = None
    if getattr(user, "is_authenticated", False):
        preference = UserPreference.objects.filter(user_id=user.pk).first()  # type: ignore[union-attr]
    cookie = unquote(scope.get("cookies", {}).get(ZONE_COOKIE, ""))
    return zone_for(preference, cookie)[0]


def usable_language(code: str | None) -> str:
    """`code` if it is one of LANGUAGES, else ""."""
    return code if code and code in dict(settings.LANGUAGES) else ""


def language_for_scope(scope: dict[str, Any]) -> str:
    """The language a websocket's page was rendered in, by the same rules as the page (user's
    setting, the switch's cookie, Accept-Language, LANGUAGE_CODE), for the live layer's renders.
    Runs in a database thread (the user's setting is a row)."""
    user: Any = scope.get("user")
    if getattr(user, "is_authenticated", False):
        chosen = UserPreference.objects.filter(user_id=user.pk).values_list("language", flat=True)
        code = usable_language(chosen.first())
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


def context(request: HttpRequest) -> dict[str, Any]:
    """For base.html: the theme to force (or "" to follow the system) and the zone in use."""
    preference = preference_of(request)
    zone, source = zone_for(preference, request.COOKIES.get(ZONE_COOKIE))
    theme = preference.theme if preference is not None else UserPreference.Theme.AUTO
    return {
        "theme": "" if theme == UserPreference.Theme.AUTO else theme,
        "zone_name": zone,
        "zone_source": source,
    }
