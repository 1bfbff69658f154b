"""The words the page's scripts show, translated like the page.

base.html renders them once as `<script type="application/json" id="ui-strings">`: data, not code,
so the Content-Security-Policy (script-src 'self') does not run it and does not need to allow it.
app.js, notify.js read it with `uiString(key, values)`; `%(name)s` placeholders are filled there.
"""

from django import template
from django.utils.html import json_script
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

register = template.Library()

STRINGS = {
    "live": _("live"),
    "connecting": _("connecting…"),
    "reconnecting": _("reconnecting…"),
    "signed_out": _("signed out"),
    "ttl_passed": _("TTL passed"),
    "ttl_left": _("TTL %(time)s left"),
    "running": _("Running…"),
    "run": _("Run"),
    "waiting": _(
        "Waiting for %(server)s to answer: %(secs)s s so far, at most %(limit)s s. "
        "The tool runs on the server; leaving this page does not stop it."
    ),
    "copied": _("Copied"),
    "picked": _("%(count)s selected"),
    "unsupported": _("unsupported"),
    # Notification.permission, as the settings page shows it
    "permission_default": _("not allowed yet"),
    "permission_granted": _("allowed"),
    "permission_denied": _("blocked in this browser's settings"),
}


@register.simple_tag
def ui_strings() -> SafeString:
    return json_script({key: str(text) for key, text in STRINGS.items()}, "ui-strings")
