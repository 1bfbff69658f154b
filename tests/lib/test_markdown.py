"""Tool descriptions in markdown: rendered by markdown-it-py, sanitised by nh3, shown on the pages."""

import re

import pytest

from tasksapp.lib.markdown import render
from tests.support.opsdata import logged_in, person, server

HOSTILE = (
    "**Counts** slowly.\n\n"
    "<script>alert(1)</script> <img src=x onerror=alert(2)>\n\n"
    "[docs](https://example.com/d) [bad](javascript:alert(3)) [data](data:text/html,<b>x</b>)\n\n"
    '- one\n- two\n\n`code` <a href="https://evil.example" onclick="alert(4)">raw</a>'
)


def test_markdown_becomes_html_and_nothing_runs() -> None:
    html = str(render(HOSTILE))
    assert "<strong>Counts</strong>" in html and "<li>one</li>" in html and "<code>code</code>" in html
    assert '<a href="https://example.com/d" rel="noopener noreferrer nofollow">docs</a>' in html
    assert "<script" not in html and "<img" not in html
    assert re.search(r"<[^>]*\bon\w+=", html) is None  # no event handler inside any tag
    assert 'href="javascript' not in html and 'href="data' not in html
    assert "&lt;script&gt;" in html  # raw HTML stays text


def test_markdown_takes_anything_a_server_sends() -> None:
    assert str(render(None)) == ""
    assert str(render(12)) == "<p>12</p>\n"
    assert len(str(render("x" * 100_000))) < 25_000


@pytest.mark.django_db
def test_tool_page_renders_the_description_as_markdown() -> None:
    alpha = server()
    alpha.tools = [{"name": "t", "description": HOSTILE, "inputSchema": {"type": "object"}}]
    alpha.save()
    client = logged_in(person("vera", "viewer"))
    html = client.get(f"/servers/{alpha.pk}/tools/").content.decode()
    assert "<strong>Counts</strong>" in html and "<script>alert" not in html
