"""A task's timeline entries (tasksapp/presenters/timeline_rows.py): byte for byte what the template
partial that wrote them before wrote (kept here as the reference), for every kind of entry, in two
languages and zones; text from servers and people is escaped; the page and a live update agree."""

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.template import engines
from django.utils import timezone, translation

from tasksapp.live.pages import timeline_entry
from tasksapp.models import TaskEvent
from tasksapp.presenters.timeline_rows import entries_html, entry_html
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>&\'"'
# The partial task_detail.html#timeline-entry as it was (the template engine's own escaping).
REFERENCE = (
    "{% load i18n dashboard %}{% autoescape on %}\n"
    + Path(__file__).with_name("timeline_entry_before.html").read_text().rstrip("\n")
    + "\n{% endautoescape %}"
)


def reference(event: TaskEvent, *, oob: bool = False) -> str:
    return engines["django"].from_string(REFERENCE).render({"event": event, "entry_oob": oob})


def events_of_every_kind() -> list[TaskEvent]:
    owner = task(server(), status_message="x")
    at = datetime(2026, 3, 29, 0, 30, 0, 42_000, tzinfo=UTC)  # the hour Europe's clocks go forward
    kinds: list[dict[str, Any]] = [
        {"status": "working", "status_message": "", "source": "poll"},
        {"status": "working", "status_message": HOSTILE, "source": "push", "note": HOSTILE},
        {"status": "input_required", "status_message": "which file?", "source": "poll", "merged": 1},
        {"status": "completed", "status_message": "done", "source": "poll", "merged": 4},
        {"status": "cancelled", "status_message": "", "source": "operator", "note": "by vera"},
        {"status": "failed", "status_message": "ü" * 300, "source": "local"},
        {"status": "working", "status_message": "12 older events", "source": "trimmed", "merged": 12},
        {"status": HOSTILE, "status_message": "", "source": "create"},
    ]
    return [
        TaskEvent.objects.create(task=owner, observed_at=at.replace(minute=30 + n), **kind)
        for n, kind in enumerate(kinds)
    ]


@pytest.mark.parametrize(
    ("language", "zone"), [("en", "UTC"), ("zh-hans", "Asia/Shanghai"), ("en", "Europe/Berlin")]
)
def test_each_entry_is_what_the_template_wrote(language: str, zone: str) -> None:
    events = events_of_every_kind()
    with translation.override(language), timezone.override(zone):
        for event in events:
            assert entry_html(event) == reference(event), event.source
            assert entry_html(event, oob=True) == reference(event, oob=True)
        assert entries_html(events) == "".join(reference(event) for event in events)


def test_text_from_servers_and_people_is_escaped_in_an_entry() -> None:
    html = entry_html(events_of_every_kind()[1])
    assert (
        "<script>" not in html
        and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;&quot;" in html
    )


def test_the_page_shows_the_entries_a_live_page_is_sent() -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    events = events_of_every_kind()
    page = client.get(f"/tasks/{events[0].task_id}/").content.decode()
    with translation.override("en"), timezone.override("UTC"):
        for event in events:
            plain, _ = timeline_entry(event)
            assert plain in page, event.source
    assert len(re.findall(r'<li id="event-', page)) == len(events)
