"""Preferences: time zone, theme, the pages that show them, plurals."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tasksapp.models import InputRequest, RemoteTask, TaskEvent, UserPreference
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db


def started_cell(html: str) -> str:
    match = re.search(r'<time datetime="([^"]+)" title="([^"]+)">([^<]+)</time>', html)
    assert match, html[:2000]
    return " | ".join(match.groups())


def test_times_are_rendered_in_the_zone_the_user_chose_and_say_it() -> None:
    vera = person("vera", "viewer")
    task(server(), started=datetime(2026, 7, 1, 12, 0, tzinfo=UTC))
    client = logged_in(vera)
    utc = started_cell(client.get("/tasks/").content.decode())
    assert "2026-07-01 12:00:00 UTC" in utc
    response = client.post("/preferences/", {"time_zone": "Asia/Shanghai", "theme": "auto", "language": ""})
    assert response.status_code == 302
    assert UserPreference.objects.get(user=vera).time_zone == "Asia/Shanghai"
    shanghai = started_cell(client.get("/tasks/").content.decode())
    assert "2026-07-01T20:00:00+08:00" in shanghai
    assert "Asia/Shanghai" in shanghai  # the title says the zone by name
    assert shanghai.endswith("2026-07-01 20:00:00 CST")


def test_without_a_choice_the_browser_zone_cookie_is_used_and_a_bad_one_ignored() -> None:
    task(server(), started=datetime(2026, 1, 15, 9, 30, tzinfo=UTC))
    client = logged_in(person("vera", "viewer"))
    client.cookies["tz"] = "America/New_York"
    assert "2026-01-15 04:30:00 EST" in client.get("/tasks/").content.decode()
    client.cookies["tz"] = "../../etc/passwd"
    assert "2026-01-15 09:30:00 UTC" in client.get("/tasks/").content.decode()


def test_an_unknown_zone_is_refused_by_the_form() -> None:
    client = logged_in(person("vera", "viewer"))
    response = client.post("/preferences/", {"time_zone": "Mars/Olympus", "theme": "auto", "language": ""})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not UserPreference.objects.exists()


def test_relative_times_show_the_absolute_time_on_hover() -> None:
    alpha = server()
    alpha.last_success_at = timezone.now() - timedelta(seconds=30)
    alpha.save()
    html = logged_in(person("vera", "viewer")).get("/").content.decode()
    assert re.search(r'<span class="ago" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">\d+s ago</span>', html)


def test_theme_button_is_a_form_post_remembered_per_user() -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    page = client.get("/tasks/").content.decode()
    assert "<html" in page and "data-theme=" not in page.split(">", 2)[1]
    assert 'id="theme-form"' in page and 'value="dark"' in page and 'value="light"' in page
    response = client.post("/preferences/theme/", {"theme": "dark", "next": "/tasks/"})
    assert response.status_code == 302 and response["Location"] == "/tasks/"
    assert 'data-theme="dark"' in client.get("/tasks/").content.decode()
    # Another browser of the same user: remembered on the server, not in a cookie.
    assert 'data-theme="dark"' in logged_in(vera).get("/").content.decode()
    background = logged_in(vera).post("/preferences/theme/", {"theme": "light"}, HTTP_HX_REQUEST="true")
    assert background.status_code == 204
    assert UserPreference.objects.get(user=vera).theme == "light"
    assert client.post("/preferences/theme/", {"theme": "purple"}).status_code == 400


def test_theme_post_needs_csrf_and_a_login() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(person("vera", "viewer"))
    assert client.post("/preferences/theme/", {"theme": "dark"}).status_code == 403
    assert Client().post("/preferences/theme/", {"theme": "dark"}).status_code == 302  # to the login page
    assert not UserPreference.objects.exists()


def test_navigation_collapses_into_a_details_menu_with_every_link() -> None:
    html = logged_in(person("vera", "viewer")).get("/").content.decode()
    menu = html[html.index('<details class="menu"') : html.index("</details>")]
    for href in ("/tasks/", "/inbox/", "/servers/", "/audit/", "/preferences/", "/shortcuts/", "/logout/"):
        assert f'"{href}"' in menu, href
    assert "<summary>" in menu


def test_shortcuts_page_and_dialog_list_the_keys() -> None:
    client = logged_in(person("vera", "viewer"))
    page = client.get("/shortcuts/").content.decode()
    assert "<kbd>?</kbd>" in page and "Go to the inbox" in page
    assert '<dialog id="shortcuts-dialog"' in client.get("/").content.decode()


def test_plurals_say_one_task_and_two_tasks() -> None:
    alpha = server()
    client = logged_in(person("vera", "viewer"))
    task(alpha)
    assert "· 1 task</span>" in client.get("/tasks/").content.decode()
    task(alpha)
    assert "· 2 tasks</span>" in client.get("/tasks/").content.decode()
    from tasksapp.models import WorkerHeartbeat

    now = timezone.now()
    WorkerHeartbeat.objects.create(
        worker="w1", hostname="h", pid=1, started_at=now, last_beat_at=now, tasks_held=1, streams_open=1
    )
    html = client.get("/").content.decode()
    assert "1 task · 1 stream" in html and "1 streams" not in html and "1 tasks" not in html


def test_overview_reports_time_to_answer_p50_and_p90_per_server() -> None:
    alpha, beta = server("alpha"), server("beta")
    now = timezone.now()
    for i, wait in enumerate([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]):
        owner = task(alpha)
        request = InputRequest(task=owner, method="elicitation/create", state="answered")
        request.set_key(f"k{i}")
        request.save()
        InputRequest.objects.filter(pk=request.pk).update(
            first_seen_at=now - timedelta(seconds=wait), answered_at=now
        )
    still_open = InputRequest(task=task(beta), method="elicitation/create")
    still_open.set_key("open")
    still_open.save()
    html = logged_in(person("vera", "viewer")).get("/").content.decode()
    row = re.search(r'<tr data-server="alpha">(.*?)</tr>', html, re.S)
    assert row, html
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells == ["alpha", "10", "50s", "1m 30s"]
    assert 'data-server="beta"' not in html  # nothing answered there yet


def test_overview_chart_has_axis_labels_and_a_tooltip_per_hour() -> None:
    html = logged_in(person("vera", "viewer")).get("/").content.decode()
    assert 'aria-labelledby="chart-title chart-desc"' in html
    assert html.count('<g class="bar"') == 24
    assert re.search(r"<title>\d\d:00-\d\d:00: 0 started, 0 finished</title>", html)
    assert "hour of day (UTC)" in html


def test_task_page_shows_the_lifecycle_bar_with_totals() -> None:
    owner = task(server())
    start = timezone.now() - timedelta(seconds=100)
    TaskEvent.objects.filter(task=owner).delete()
    for offset, status in ((0, "working"), (30, "input_required"), (90, "working"), (95, "completed")):
        at = start + timedelta(seconds=offset)
        TaskEvent.objects.create(task=owner, status=status, source="poll", observed_at=at)
    RemoteTask.objects.filter(pk=owner.pk).update(status="completed", finished_at=at)
    html = logged_in(person("vera", "viewer")).get(f"/tasks/{owner.pk}/").content.decode()
    bar = html[html.index('id="task-lifecycle"') :]
    assert "working 35s" in bar and "waiting for input 1m 0s" in bar and "waiting on cancel 0s" in bar
    assert re.search(r'<rect class="input" x="316" y="0" width="632"', bar), bar[:1500]


def test_a_zone_cookie_written_url_encoded_is_read_too() -> None:
    task(server(), started=datetime(2026, 1, 15, 9, 30, tzinfo=UTC))
    client = logged_in(person("vera", "viewer"))
    client.cookies["tz"] = "Asia%2FTokyo"
    assert "2026-01-15 18:30:00 JST" in client.get("/tasks/").content.decode()
