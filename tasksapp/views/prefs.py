"""A person's own preferences (time zone, theme, language): the preferences page, the theme button,
the language switch; and the keyboard shortcuts page.

These change nothing anybody else sees, so every signed-in user may set them, whatever the role.
"""

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from tasksapp import prefs, services
from tasksapp.models import UserPreference
from tasksapp.views.common import page, safe_next


def _zone_choices() -> list[tuple[str, Any]]:
    return [("", gettext_lazy("My browser's zone")), *((name, name) for name in sorted(prefs.zone_names()))]


def _language_choices() -> list[tuple[str, Any]]:
    return [("", gettext_lazy("My browser's language")), *((code, name) for code, name in settings.LANGUAGES)]


class PreferenceForm(forms.ModelForm):  # type: ignore[type-arg]
    time_zone = forms.ChoiceField(label=gettext_lazy("Time zone"), required=False, choices=_zone_choices)
    language = forms.ChoiceField(label=gettext_lazy("Language"), required=False, choices=_language_choices)

    class Meta:
        model = UserPreference
        fields = ["time_zone", "theme", "language"]
        labels = {"theme": gettext_lazy("Theme")}
        widgets = {"theme": forms.RadioSelect}


def preferences(request: HttpRequest) -> HttpResponse:
    current = prefs.preference_of(request) or UserPreference(user_id=int(request.user.pk or 0))
    form = PreferenceForm(request.POST or None, instance=current)
    if request.method == "POST" and form.is_valid():
        prefs.remember(request, services.preference_set(user=request.user, **_fields(form.cleaned_data)))
        messages.success(request, _("Preferences saved."))
        return redirect("tasks:preferences")
    zone, source = prefs.zone_for(prefs.preference_of(request), request.COOKIES.get(prefs.ZONE_COOKIE))
    context = {"form": form, "zone": zone, "zone_source": source, "server_zone": settings.TIME_ZONE}
    return page(request, "tasksapp/preferences.html", context, nav="preferences")


def _fields(data: dict[str, Any]) -> dict[str, str]:
    return {name: str(data.get(name) or "") for name in ("time_zone", "theme", "language")}


@require_POST
def theme(request: HttpRequest) -> HttpResponse:
    """The header's light/dark button: a plain form POST; app.js sends it in the background (204)."""
    choice = request.POST.get("theme", "")
    if choice not in UserPreference.Theme.values:
        return HttpResponse(_("Unknown theme."), status=400, content_type="text/plain")
    services.preference_set(user=request.user, theme=choice)
    if request.headers.get("HX-Request"):
        return HttpResponse(status=204)
    return redirect(safe_next(request, "/"))


def shortcuts(request: HttpRequest) -> HttpResponse:
    return page(request, "tasksapp/shortcuts.html", {}, nav="shortcuts")


@login_not_required
@require_POST
def language_switch(request: HttpRequest) -> HttpResponse:
    """Django's set_language (a POST with CSRF, no JavaScript; sets the language cookie). For a user
    who chose a language in their preferences, the switch changes that choice too (else the
    setting, which outranks the cookie, would undo the switch on the next page)."""
    response = set_language(request)
    code = prefs.usable_language(request.POST.get("language"))
    preference = prefs.preference_of(request) if request.user.is_authenticated else None
    if code and preference is not None and preference.language:
        services.preference_set(user=request.user, language=code)
    return response
