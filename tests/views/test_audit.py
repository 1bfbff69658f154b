"""The audit log you can use: filters by user, server, action and date; server edits
record what changed (timeouts included) with secrets masked; archive and export are audited too."""

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasksapp import services
from tasksapp.models import McpServer, OperatorAction
from tests.support.opsdata import logged_in, person, server

pytestmark = pytest.mark.django_db(transaction=True)


def shown(client: Client, **params: str) -> str:
    response = client.get(reverse("tasks:audit"), params)
    assert response.status_code == 200
    return response.content.decode()


def test_filters_by_user_server_action_and_date() -> None:
    ada, bob = person("ada", "admin"), person("bob", "admin")
    alpha, beta = server("alpha"), server("beta")
    entries = {
        "ada-alpha": OperatorAction.objects.create(
            user=ada, action="server_edit", server=alpha, detail={"summary": "s1"}
        ),
        "bob-beta": OperatorAction.objects.create(
            user=bob, action="server_refresh", server=beta, detail={"summary": "s2"}
        ),
        "old": OperatorAction.objects.create(
            user=bob, action="server_edit", server=alpha, detail={"summary": "s3"}
        ),
    }
    ten_days_ago = timezone.now() - timedelta(days=10)
    OperatorAction.objects.filter(pk=entries["old"].pk).update(created_at=ten_days_ago)
    client = logged_in(person("vera", "viewer"))

    def summaries(**params: str) -> list[str]:
        page = shown(client, **params)
        return [s for s in ("s1", "s2", "s3") if f'<span class="small">{s}</span>' in page]

    assert summaries() == ["s1", "s2", "s3"]
    assert summaries(user=str(bob.pk)) == ["s2", "s3"]
    assert summaries(server=str(alpha.pk)) == ["s1", "s3"]
    assert summaries(action="server_edit") == ["s1", "s3"]
    assert summaries(**{"from": f"{timezone.localdate():%Y-%m-%d}"}) == ["s1", "s2"]
    assert summaries(to=f"{ten_days_ago:%Y-%m-%d}") == ["s3"]
    assert summaries(user=str(bob.pk), action="server_edit") == ["s3"]
    # the pager keeps the filters
    assert f"user={bob.pk}" in shown(client, user=str(bob.pk))


def test_a_server_edit_records_every_change_with_secrets_masked(demo_registered: McpServer) -> None:
    ada = person("ada", "admin")
    secret = "Bearer sk-live-0123456789abcdef"
    services.server_update(
        server=demo_registered,
        url=demo_registered.url,
        headers={"Authorization": secret},
        enabled=False,
        user=ada,
        timeouts=(45, 900),
    )
    entry = OperatorAction.objects.filter(action="server_edit").latest("id")
    stored = json.dumps(entry.detail)
    assert "sk-live" not in stored and "0123456789" not in stored
    changes = entry.detail["changes"]
    assert changes["enabled"] == [True, False]
    assert changes["headers"] == [{}, {"Authorization": "••••••••cdef"}]
    assert changes["read_timeout_seconds"] == [30, 45]
    assert changes["call_timeout_seconds"] == [600, 900]
    page = shown(logged_in(person("vera", "viewer")), action="server_edit")
    assert "read_timeout_seconds: 30 → 45" in page and "sk-live" not in page


def test_notification_changes_and_retries_are_labelled_and_filterable() -> None:
    from tasksapp.models import NotificationOutbox
    from tasksapp.notify.send import outbox_retry

    ada = person("ada", "admin")
    client = logged_in(ada)
    assert client.post(reverse("tasks:notify"), {"events": ["failed"]}).status_code == 302
    outbox_retry(rows=NotificationOutbox.objects.none(), user=ada)

    page = shown(client)
    assert '<option value="notify_settings"' in page and '<option value="notify_retry"' in page
    assert rows(page) == ["retried notifications", "changed notification settings"]  # not raw keys
    assert rows(shown(client, action="notify_retry")) == ["retried notifications"]


def rows(page: str) -> list[str]:
    """What each audit row says was done (the "Did" column), newest first."""
    return [
        re.sub(r"<.*", "", cell, flags=re.S).strip()
        for cell in re.findall(r'data-label="Did">(.*?)</td>', page, re.S)
    ]


def test_an_export_is_summarised_in_the_readers_language() -> None:
    client = logged_in(person("ada", "admin"))
    assert client.get(reverse("tasks:export", args=["csv"]), {"status": "working"}).status_code == 200
    english = shown(client)
    assert "the task list as CSV (status=working)" in english
    chinese = client.get(reverse("tasks:audit"), headers={"accept-language": "zh-Hans"}).content.decode()
    assert "任务列表\uff08CSV\uff09 (status=working)" in chinese and "as CSV" not in chinese
