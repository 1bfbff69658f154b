"""The overview's hourly chart (tasksapp/presenters/overview.py chart_html): byte for byte what the
template that wrote it before wrote (kept here as the reference), for counts of 0, 1 and many, in
two languages and in zones a whole hour, half an hour and 45 minutes from UTC; the page shows it."""

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.template import engines
from django.test import Client
from django.utils import timezone, translation

from tasksapp.presenters.overview import chart_html, hourly_chart
from tests.support.opsdata import logged_in, person

pytestmark = pytest.mark.django_db

REFERENCE = Path(__file__).with_name("overview_chart_before.html").read_text()
NOW = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # the night Europe's clocks go forward


def reference(chart: dict[str, Any]) -> str:
    return engines["django"].from_string(REFERENCE).render({"chart": chart})


SHAPES: list[tuple[Callable[[int], int], Callable[[int], int]]] = [
    (lambda hour: 0, lambda hour: 0),  # nothing
    (lambda hour: int(hour == 0), lambda hour: int(hour == 5)),  # one of each
    (lambda hour: 1000 + 37 * hour, lambda hour: 2 * hour if hour % 3 == 0 else 0),  # a four-digit peak
]


def charts() -> list[dict[str, Any]]:
    """Charts of each of SHAPES, made from the reader's zone's real chart (hours and labels)."""
    shapes = []
    for started, finished in SHAPES:
        chart = hourly_chart(NOW)
        for hour, bar in enumerate(chart["bars"]):
            bar.update(started=started(hour), finished=finished(hour), h_started=hour * 4,
                       y_started=100 - hour * 4, h_finished=hour, y_finished=100 - hour)  # fmt: skip
        chart["peak"] = max([1, *(started(hour) for hour in range(24))])
        chart["total_started"] = sum(started(hour) for hour in range(24))
        chart["total_finished"] = sum(finished(hour) for hour in range(24))
        shapes.append(chart)
    return shapes


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Asia/Kolkata", "Asia/Kathmandu"])
def test_the_chart_is_written_as_the_template_wrote_it(language: str, zone: str) -> None:
    with translation.override(language), timezone.override(zone):
        for chart in charts():
            assert chart_html(chart) == reference(chart)


def test_the_zone_name_is_escaped() -> None:
    chart = charts()[1]
    chart["zone"] = '<script>alert("x")</script>'
    written = chart_html(chart)
    assert written == reference(chart)
    assert "<script>" not in written and "&lt;script&gt;" in written


def test_the_overview_shows_the_chart() -> None:
    client: Client = logged_in(person("vera", "viewer"))
    page = client.get("/").content.decode()
    assert page.count('id="hourly-chart"') == 1 and page.count('<g class="bar"') == 24
