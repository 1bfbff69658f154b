"""Each user's notification settings: which events, servers and tools, and where."""

import os
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.models import McpServer, NotificationPreference
from tasksapp.permissions import VIEW, require
from tasksapp.services.notifications import notification_preference_get, notification_preference_set
from tasksapp.services.outbound import webhook_url_refusal
from tasksapp.views.common import page

EVENT_CHOICES = [
    ("input", gettext_lazy("a task needs input")),
    ("failed", gettext_lazy("a task fails")),
    ("unhealthy", gettext_lazy("a server goes unhealthy")),
]


class PreferenceForm(forms.Form):
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label=gettext_lazy("Tell me when"),
    )
    servers = forms.ModelMultipleChoiceField(
        queryset=McpServer.objects.filter(archived=False).order_by("name").only("id", "name"),
        required=False,
        label=gettext_lazy("Servers (none selected: all)"),
    )
    tools = forms.CharField(
        required=False, max_length=2000, label=gettext_lazy("Tools, comma-separated (empty: all)")
    )
    email = forms.EmailField(required=False, label=gettext_lazy("Email to"))
    webhook_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        label=gettext_lazy("Webhook URL (Slack-compatible)"),
    )
    webhook_secret = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.PasswordInput,
        label=gettext_lazy("Webhook signing secret (left empty: kept as it is)"),
    )
    browser = forms.BooleanField(
        required=False, label=gettext_lazy("Browser notifications on this dashboard")
    )

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data["webhook_url"]
        if url and (refusal := webhook_url_refusal(url)):
            raise forms.ValidationError(
                _("This webhook URL cannot be used: %(reason)s.") % {"reason": refusal}
            )
        return url


@require(VIEW)
def notify_settings(request: HttpRequest) -> HttpResponse:
    pref = notification_preference_get(user_id=int(request.user.pk or 0))
    if request.method == "POST":
        form = PreferenceForm(request.POST)
        if form.is_valid():
            _save(pref, form.cleaned_data, request.user)
            messages.success(request, _("Notification settings saved."))
            return redirect("tasks:notify")
    else:
        form = PreferenceForm(initial=_initial(pref))
    context = {
        "form": form,
        "has_secret": bool(pref.webhook_secret_encrypted),
        "pref": pref,
        "demo_sink": settings.DEMO_SINK_URL,
        "demo_mail_to_sink": bool(settings.DEMO_SINK_URL) and "EMAIL_HOST" not in os.environ,
    }
    return page(request, "tasksapp/notify_settings.html", context, nav="notify")


def _initial(pref: NotificationPreference) -> dict[str, Any]:
    return {
        "events": pref.events,
        "servers": pref.server_ids,
        "tools": ", ".join(pref.tools),
        "email": pref.email,
        "webhook_url": pref.webhook_url,
        "browser": pref.browser,
    }


def _save(pref: NotificationPreference, data: dict[str, Any], user: Any) -> None:
    notification_preference_set(
        pref=pref,
        events=data["events"],
        server_ids=(server.pk for server in data["servers"]),
        tools=data["tools"].split(","),
        email=data["email"],
        webhook_url=data["webhook_url"],
        webhook_secret=data["webhook_secret"],
        browser=data["browser"],
        user=user,
    )
