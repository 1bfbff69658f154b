"""A task's timeline entries as HTML, for its page (task_detail.html#task-timeline, through the
{% timeline_entries %} tag) and its live updates (tasksapp/live/pages.py): one builder, so an entry
sent live is byte for byte the entry a reload shows.

Written here rather than in the template because a task's page shows 50 entries and the template
engine spent about 0.3 ms on each, more than half of the page's time. The markup is what the
template wrote. What a server or a person wrote (the status, its message, a note) is escaped
(html.escape, what django.utils.html.escape calls); the dashboard's own words and times are not,
as the template engine treats them.
"""

from collections.abc import Iterable
from html import escape
from typing import Any

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from tasksapp.presenters.times import stamp_local

_ENTRY = (
    '\n    <li id="event-{pk}"{trimmed}{oob}><span class="when">{when}</span>\n'
    '      <span class="badge {slug}">{status}</span>\n'
    '      <span class="small muted">{via}</span>\n'
    "      {message}\n"
    "      {merged}\n"
    "      {note}</li>\n"
)
TRIMMED = "trimmed"  # TaskEvent.Source.TRIMMED: the summary of removed events


class _Words:
    """What every entry of one render shares: the words in the active language, the reader's zone."""

    def __init__(self) -> None:
        self.via = _("via %(source)s")
        self.zone = timezone.get_current_timezone()
        self.zone_name = timezone.get_current_timezone_name()
        self.statuses: dict[str, tuple[str, str]] = {}  # status: (its words, escaped; its slug)
        self.sources: dict[str, str] = {}  # source: "via …", escaped (get_source_display's words)


def entry_html(event: Any, *, oob: bool = False) -> SafeString:
    """One entry of the timeline (`oob`: marked for htmx's out-of-band swap)."""
    return mark_safe(_entry(event, _Words(), oob=oob))  # noqa: S308 (_entry escapes)


def entries_html(events: Iterable[Any]) -> SafeString:
    """The entries of `events`, in order, as one string."""
    words = _Words()
    return mark_safe("".join([_entry(event, words, oob=False) for event in events]))  # noqa: S308


def _entry(event: Any, words: _Words, *, oob: bool) -> str:
    status = str(event.status)
    shown = words.statuses.get(status)
    if shown is None:
        shown = words.statuses[status] = (escape(pgettext("task status", status)), escape(slugify(status)))
    via = words.sources.get(event.source)
    if via is None:  # get_source_display builds the field's whole choices map on every call
        via = words.sources[event.source] = words.via % {"source": escape(str(event.get_source_display()))}
    trimmed = event.source == TRIMMED
    merged = event.merged
    counted = merged + 1 if merged and not trimmed else 0
    message = event.status_message
    note = event.note
    return _ENTRY.format(
        pk=event.pk,
        trimmed=' class="trimmed"' if trimmed else "",
        oob=' hx-swap-oob="true"' if oob else "",
        when=stamp_local(event.observed_at.astimezone(words.zone), words.zone_name, "H:i:s.ms"),
        slug=shown[1],
        status=shown[0],
        via=via,
        message=f" — {escape(message)}" if message else "",
        merged=(
            f' <span class="small muted" data-merged="{merged}">('
            + ngettext(
                "latest of %(counter)s message within a second",
                "latest of %(counter)s messages within a second",
                counted,
            )
            % {"counter": counted}
            + ")</span>"
            if counted
            else ""
        ),
        note=f' <i class="small">{escape(note)}</i>' if note else "",
    )
