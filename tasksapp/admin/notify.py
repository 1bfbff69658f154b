"""Notifications in the admin site: each user's choices, and the
outbox read-only, with a "retry now" action that goes through the send module's service."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.admin.base import ReadOnlyAdmin
from tasksapp.models import NotificationOutbox, NotificationPreference
from tasksapp.notify.send import outbox_retry


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic only in django-stubs
    list_display = ["user", "events", "email", "webhook_url", "browser", "updated_at"]
    list_select_related = ["user"]
    exclude = ["webhook_secret_encrypted"]  # the secret is set on the user's own settings page


@admin.register(NotificationOutbox)
class NotificationOutboxAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "user",
        "channel",
        "event",
        "subject",
        "state",
        "attempts",
        "next_attempt_at",
    ]
    list_filter = ["state", "channel", "event"]
    search_fields = ["subject", "key"]
    list_select_related = ["user"]
    actions = ["retry_now"]

    @admin.action(description=gettext_lazy("Retry the selected notifications now"))
    def retry_now(self, request: HttpRequest, queryset: QuerySet[NotificationOutbox]) -> None:
        count = outbox_retry(rows=queryset, user=request.user)
        self.message_user(
            request, _("Notifications to send again: %(count)s") % {"count": count}, messages.INFO
        )
