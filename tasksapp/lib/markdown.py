"""A server's markdown (tool descriptions) as HTML a page can show.

markdown-it-py parses CommonMark with raw HTML turned off (a server's `<script>` stays text); nh3
(the Ammonia sanitiser) then keeps only the tags below, links only to http(s) and mailto, and adds
rel="noopener noreferrer nofollow" to every link. Images are dropped: the Content-Security-Policy
would refuse another origin's anyway, and a description has no business loading one.
"""

from typing import Any

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

MAX_SOURCE = 20_000
TAGS = {
    "p", "br", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "a", "hr",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del",
}  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_parser.enable("strikethrough")


def render(text: Any) -> SafeString:
    """Sanitised HTML for `text` (anything: a server may send a number or a list); "" for nothing."""
    if text is None or text == "":
        return mark_safe("")
    source = str(text)[:MAX_SOURCE]
    html = nh3.clean(
        _parser.render(source),
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(html)  # noqa: S308 (nh3 kept only the tags and attributes above)
