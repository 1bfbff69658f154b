"""The navigation's open-question badge (tasksapp/presenters/inbox.py badge_html): byte for byte what
_inbox_badge.html wrote before (kept as the reference), for no, one and many questions, on a page
and pushed out of band, in two languages; every page and the live push show it."""

from pathlib import Path

import pytest
from django.template import engines
from django.template.loader import render_to_string
from django.utils import translation

from tasksapp.presenters.inbox import badge_html

REFERENCE = Path(__file__).with_name("inbox_badge_before.html").read_text()


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("waiting", [0, 1, 2, 1234])
@pytest.mark.parametrize("oob", [False, True])
def test_the_badge_is_the_templates_byte_for_byte(language: str, waiting: int, oob: bool) -> None:
    with translation.override(language):
        before = engines["django"].from_string(REFERENCE).render({"inbox_count": waiting, "oob": oob})
        assert badge_html(waiting, oob=oob) == before
        # The template the live socket renders writes the same.
        assert render_to_string("tasksapp/_inbox_badge.html", {"inbox_count": waiting, "oob": oob}) == before
