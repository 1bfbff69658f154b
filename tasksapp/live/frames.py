"""Frames a page's socket sends: fragments joined up to a size cap, never one frame over it.

A fragment bigger than the cap (a task result with a large image, a long timeline) is not sent:
the frame carries a small hint instead, naming the element, and the page fetches that element
from its own URL (static/tasksapp/app.js). Daphne refuses frames over 1 MiB and closes the
socket; the cap keeps well under that and keeps one change from holding up the others.
"""

from django.conf import settings
from django.utils.html import escape

HINT_BUDGET = 4096


def cap() -> int:
    return int(settings.LIVE_MAX_FRAME_BYTES)


def reload_hint(element_ids: list[str]) -> str:
    """Swapped into the page's #live-reload; app.js reloads each named element from the page URL."""
    names = escape(" ".join(element_ids))
    return f'<div id="live-reload" hidden hx-swap-oob="true" data-reload="{names}"></div>'


def pack(fragments: list[tuple[str, str]]) -> list[str]:
    """Join (element id, html) fragments into as few frames as fit under the cap, in order."""
    limit = cap() - HINT_BUDGET
    frames: list[str] = []
    current: list[str] = []
    size = 0
    too_big: list[str] = []
    for element_id, html in fragments:
        length = len(html) if html.isascii() else len(html.encode())  # no copy for the usual case
        if length > limit:
            too_big.append(element_id)
            continue
        if current and size + length > limit:
            frames.append("".join(current))
            current, size = [], 0
        current.append(html)
        size += length
    if too_big:
        current.append(reload_hint(too_big[:50]))
    if current:
        frames.append("".join(current))
    return frames
