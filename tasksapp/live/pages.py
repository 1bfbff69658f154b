"""What each live page is sent: its groups, what changed since a time, and the fragments for one
change. Fragments are rendered once per change per audience (page kind and role, tasksapp.live.
shared) and carry no per-user data: no CSRF token (app.js adds the page's own to a form when it
is submitted), no user name. Table rows travel inside <template>, which parses them anywhere.
"""

import asyncio
import hashlib
import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.safestring import mark_safe

from tasksapp import events
from tasksapp.live import fanout, shared
from tasksapp.live.cache import RenderCache
from tasksapp.models import InputRequest, McpServer, RemoteTask, ServerHealth, TaskEvent, holder_key
from tasksapp.permissions import roles_of
from tasksapp.presenters import inbox as inbox_view
from tasksapp.presenters import task_rows, timeline_rows
from tasksapp.presenters.task import SHOW_LIMIT, TIMELINE_PAGE, detail_task, input_view, task_context
from tasksapp.presenters.task_card import card_html
from tasksapp.queryparams import parse_count, parse_id

Item = tuple[str, int]  # ("task", pk), ("server", pk), ("overview", 0)
Fragment = tuple[str, str]  # (element id, html)


@dataclass(frozen=True)
class Choice:
    """A part of a frame that depends on the socket's own page (tasksapp/live/rooms.py): `first` if
    the page picks it (LivePage.pick), else `second`. A task started after one page was rendered
    is added at the top of that page and replaced in place on a later one; a question is added to
    an inbox that does not show it yet."""

    element_id: str
    key: Any  # what the page is asked about: the task's start, its id
    first: str
    second: str


Part = Fragment | Choice
RELOAD_REGION = "live-region"  # every live page's updatable part, reloaded whole when needed
TASK_SECTIONS = ("task-card", "task-inputs", "task-result", "task-timeline", "task-raw")
ACTIONS_SLOT = mark_safe("<!--task-actions-->")  # where each role's actions go in a shared card
TIMELINE_MAX_SHOW = 100_000  # as the page's ?show= (six digits)
EVERY_ROW = "*"  # the stale mark for every row of a server, whoever holds the task (never a holder key)


def audience(user: Any) -> tuple[tuple[str, bool], ...]:
    return tuple(sorted(roles_of(user).items()))


_recent: RenderCache[tuple[datetime, int], list[int] | None] = RenderCache(
    size=256, kept="changed_since", reused="changed_since_reused"
)
RECENT_SECONDS = 1.0


def tasks_changed_since(since: datetime, limit: int) -> list[int] | None:
    """Tasks with anything a page shows changed at or after `since`; None when over `limit`.

    Every status or message change, cancel request and expiry records a TaskEvent (indexed by
    time); creation and input requests have their own times. When a process's hub notices a lost
    message, all its sockets ask this with the same `since` at once: asked again within a second,
    the answer is reused (one query for all of them; later changes reach them as messages)."""
    not_before = time.monotonic() - RECENT_SECONDS
    return _recent.get_or_make((since, limit), not_before, lambda: _changed_since(since, limit))


def _changed_since(since: datetime, limit: int) -> list[int] | None:
    """Every task changed at or after `since`, or None when more than `limit` tasks did.

    Counted in distinct tasks, not in rows: a few chatty tasks can make thousands of events, and
    cutting those rows at the limit dropped the quiet tasks' changes without saying so."""
    ids: set[int] = set()
    sources = (
        TaskEvent.objects.filter(observed_at__gte=since).values_list("task_id", flat=True),
        RemoteTask.objects.filter(created_at__gte=since).values_list("id", flat=True),
        InputRequest.objects.filter(
            Q(first_seen_at__gte=since) | Q(answered_at__gte=since) | Q(closed_at__gte=since)
        ).values_list("task_id", flat=True),
    )
    for rows in sources:
        # Each source's distinct ids, at most limit + 1: one more than the limit is enough to know.
        ids.update(rows.order_by().distinct()[: limit + 1])
        if len(ids) > limit:
            return None
    return sorted(ids)


SERVERS_CAUGHT_UP = 200  # servers a catch-up sends before it asks the page to reload instead


def _at_most(ids: Any, limit: int) -> list[int] | None:
    """The ids of a values_list query, or None when there are more than `limit`."""
    found = list(ids[: limit + 1])
    return None if len(found) > limit else found


class _Request:
    """Partials read request.path for their 'next' links; a websocket has no HTTP request."""

    def __init__(self, path: str) -> None:
        self.path = path


class LivePage:
    coalesce = 0.0  # seconds; set from settings

    def __init__(self, roles: tuple[tuple[str, bool], ...], page_since: datetime) -> None:
        self.roles = roles
        # What every fragment's context carries: the role's flags, and no CSRF token, so
        # {% csrf_token %} renders nothing. (Django's "NOTPROVIDED" marker would say so silently,
        # but Django 6.1's format_html("") raises on it; the DEBUG-only warning is harmless.)
        self.flags: dict[str, object] = dict(roles)
        self.page_since = page_since  # when the page (or the previous socket) was last in step
        self.coalesce = settings.LIVE_COALESCE_SECONDS

    def groups(self) -> list[str]:
        raise NotImplementedError

    def wants(self, item: Item) -> bool:
        """Whether a change to `item` (from one of the page's groups) concerns this page."""
        return True

    def catch_up(self, since: datetime) -> list[Item] | None:
        """Items changed since `since` (sync, database); None when too many: reload the region."""
        raise NotImplementedError

    def share_key(self) -> tuple[Any, ...]:
        """What every socket of one room shares (tasksapp/live/rooms.py): the page kind, what the
        page was asked for and the audience. Sockets with the same key get the same frames."""
        return (type(self).__name__, self.roles)

    # Whether what this page is sent depends on what it was sent before (a task page's sections,
    # a task list's stale marks): a socket joining a room gets the whole first (tasksapp/live/rooms.py).
    remembers = False

    def blank(self) -> "LivePage":
        """The same page with nothing sent yet."""
        return type(self)(self.roles, self.page_since)

    def state_items(self) -> list[Item]:
        """Items a joining socket must have had whole before it shares what the room sends."""
        return []

    def pick(self, choice: Choice) -> bool:
        """Whether this socket's page takes `choice.first` (and notes that it now has it)."""
        return False

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        raise NotImplementedError

    async def fragments_many(self, due: dict[Item, float]) -> list[Part]:
        """The parts for every item of one flush (item -> when the room learnt of it), in order;
        rendered all at once, so that every room flushing on the same tick shares them."""
        if len(due) == 1:  # a task's page: its one task (no task to gather it in)
            ((item, at),) = due.items()
            return await self.fragments(item, at)
        found = await asyncio.gather(*(self.fragments(item, at) for item, at in due.items()))
        return [fragment for part in found for fragment in part]


def resolved(parts: list[Part], picks: tuple[bool, ...]) -> list[Fragment]:
    """The fragments of `parts` for a page that made `picks` (one per Choice, in order)."""
    chosen = iter(picks)
    return [
        (part.element_id, part.first if next(chosen) else part.second) if isinstance(part, Choice) else part
        for part in parts
    ]


@dataclass(frozen=True)
class Timeline:
    """A task's timeline as a page of `show` entries shows it, rendered once per change."""

    section: str  # the whole section, out-of-band
    older: str  # the "N older events not shown · show older" line, out-of-band
    entries: tuple[tuple[int, str, str], ...]  # (event id, entry, the entry out-of-band), oldest first

    # Hashed once for every socket that compares against this render (it is shared), not per socket.
    @cached_property
    def older_digest(self) -> str:
        return digest(self.older)

    @cached_property
    def digests(self) -> tuple[tuple[int, str], ...]:
        """(event id, digest of the entry out-of-band), oldest first."""
        return tuple((pk, digest(oob)) for pk, _, oob in self.entries)


Rendered = tuple[list[tuple[str, str, str]], Timeline]  # a task page's sections (id, html, digest), timeline


def digest(html: str) -> str:
    return hashlib.blake2b(html.encode(), digest_size=16).hexdigest()


class TaskPage(LivePage):
    """A task's page: each section is sent only when it differs from what this socket last sent;
    the timeline as its new entries (added at the end, the oldest beyond the page's `show` removed)
    and the entries that changed (a message folded in), not as a whole."""

    def __init__(
        self, roles: tuple[tuple[str, bool], ...], page_since: datetime, pk: int, show: int = TIMELINE_PAGE
    ) -> None:
        super().__init__(roles, page_since)
        self.pk = pk
        self.show = max(TIMELINE_PAGE, min(show, TIMELINE_MAX_SHOW))
        self.sent: dict[str, str] = {}
        # The timeline this socket last sent, (event id, digest) oldest first, and its "older" line;
        # None until it has sent one: the page has what it was rendered with, which may be older.
        self.entries: list[tuple[int, str]] | None = None
        self.older = ""

    def groups(self) -> list[str]:
        # Every task change, through the process's one subscription (tasksapp/live/hub.py), of
        # which the page keeps its task's: a group per task cost a channel-layer message per tab
        # and per change, and Redis round trips were a quarter of a loaded Daphne's event loop.
        return [events.TASKS]

    def wants(self, item: Item) -> bool:
        return item == ("task", self.pk)

    def share_key(self) -> tuple[Any, ...]:
        return (*super().share_key(), self.pk, self.show)

    remembers = True

    def blank(self) -> "TaskPage":
        return TaskPage(self.roles, self.page_since, self.pk, self.show)

    def state_items(self) -> list[Item]:
        return [("task", self.pk)]

    def catch_up(self, since: datetime) -> list[Item] | None:
        changed = tasks_changed_since(since, settings.LIVE_CATCH_UP_LIMIT)
        return [("task", self.pk)] if changed is None or self.pk in changed else []

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        if not self.wants(item):
            return []
        rendered = await self._rendered(not_before)
        if rendered is None:
            return []
        sections, timeline = rendered
        changed: list[Part] = []
        for element_id, html, hashed in sections:
            if self.sent.get(element_id) != hashed:
                self.sent[element_id] = hashed
                changed.append((element_id, html))
        html = self._timeline_changes(timeline)
        if html:
            # Named after the section: too big for a frame, the page reloads the whole section.
            changed.insert(TASK_SECTIONS.index("task-raw"), ("task-timeline", html))
        return changed

    def _timeline_changes(self, timeline: Timeline) -> str:
        """What turns the timeline this socket last sent into `timeline`: removed entries deleted,
        changed ones replaced, new ones added at the end; the whole section when the order moved
        (a "trimmed" summary entering the page) or nothing was sent yet."""
        new = list(timeline.digests)
        older = timeline.older_digest
        old, self.entries, last_older, self.older = self.entries, new, self.older, older
        if old is None:
            return timeline.section
        old_ids = {pk for pk, _ in old}
        new_ids = {pk for pk, _ in new}
        kept = [pk for pk, _ in old if pk in new_ids]
        added = [pk for pk, _ in new if pk not in old_ids]
        if [pk for pk, _ in new] != kept + added:
            return timeline.section
        was = dict(old)
        parts = [f'<li id="event-{pk}" hx-swap-oob="delete"></li>' for pk, _ in old if pk not in new_ids]
        if older != last_older:
            parts.append(timeline.older)
        hashed = dict(new)
        parts += [oob for pk, _, oob in timeline.entries if pk in was and was[pk] != hashed[pk]]
        if added:
            plain = [(pk, html) for pk, html, _ in timeline.entries if pk not in old_ids]
            # Deleted first: a page that reloaded its timeline (a reload hint) may have one already.
            parts += [f'<li id="event-{pk}" hx-swap-oob="delete"></li>' for pk, _ in plain]
            parts.append(
                '<ol hx-swap-oob="beforeend:#timeline-events">' + "".join(html for _, html in plain) + "</ol>"
            )
        return "".join(parts)

    async def _rendered(self, not_before: float) -> Rendered | None:
        """This audience's render of the task's sections, from the task as read once for every
        audience (the reads were most of a render, and every audience made them again)."""

        async def make() -> Rendered | None:
            data = await shared.render(("task-data", self.pk, self.show), not_before, self._load)
            if data is None:
                return None
            rendered: Rendered | None = await shared.step(self._render)(data)
            return rendered

        found: Rendered | None = await shared.made(("task", self.pk, self.roles, self.show), not_before, make)
        return found

    def _load(self) -> dict[str, Any] | None:
        """What every audience's render of the task's page reads (the task, its timeline, its open
        questions, where its time went), or None when the task is gone."""
        task = detail_task(self.pk)
        if task is None:
            return None
        return task_context(task, AnonymousUser(), show=self.show)

    def _card(self, data: dict[str, Any], context: dict[str, Any]) -> str:
        """The task's card: its most costly section, rendered once per change, language and zone
        for every role, with each role's own actions (all a role changes in it) put in its place."""
        cards = cast(dict[tuple[str, str], str], data.setdefault("cards", {}))
        locale = _locale()
        card = cards.get(locale)
        if card is None:  # two roles' renders at once may both render it: the same card
            card = cards[locale] = card_html(data["task"], data["life"], oob=True, actions=ACTIONS_SLOT)
        actions = render_to_string("tasksapp/task_detail.html#task-actions", context)
        return card.replace(ACTIONS_SLOT, actions, 1)

    def _render(self, data: dict[str, Any] | None = None) -> Rendered | None:
        """(element id, html, its digest) of each section, and the timeline: rendered and hashed
        once for every socket of the audience."""
        data = self._load() if data is None else data
        if data is None:
            return None
        task = cast(RemoteTask, data["task"])
        context = {
            **data,
            **self.flags,
            "oob": True,
            "request": _Request(f"/tasks/{task.pk}/"),
        }
        template = "tasksapp/task_detail.html"
        timeline_events = cast(list[TaskEvent], context["events"])
        sections: list[tuple[str, str, str]] = [
            (name, html, digest(html))
            for name in TASK_SECTIONS
            if name != "task-timeline"
            for html in (
                self._card(data, context)
                if name == "task-card"
                else render_to_string(f"{template}#{name}", context),
            )
        ]
        entries = tuple((event.pk, *timeline_entry(event)) for event in timeline_events)
        timeline = Timeline(
            # The entries as rendered above (render_to_string's output is safe: already escaped).
            section=render_to_string(
                f"{template}#task-timeline", {**context, "entries_html": [plain for _, plain, _ in entries]}
            ),
            older=render_to_string(f"{template}#timeline-older", {**context, "older_oob": True}),
            entries=entries,
        )
        return sections, timeline


def _locale() -> tuple[str, str]:
    return translation.get_language(), timezone.get_current_timezone_name()


_entries: RenderCache[tuple[Any, ...], tuple[str, str]] = RenderCache(
    size=20_000, kept="timeline_rendered", reused="timeline_reused"
)


def timeline_entry(event: TaskEvent) -> tuple[str, str]:
    """A timeline entry, as it is and out-of-band. An entry changes only when its event does (a
    folded message, a note), so it is rendered once per content, language and zone (docs/live.md,
    *What a process keeps between renders*)."""
    text = hashlib.blake2b(f"{event.status_message}\x00{event.note}".encode(), digest_size=16).digest()
    key = (
        event.pk,
        event.source,
        event.status,
        event.observed_at,
        event.merged,
        text,
        translation.get_language(),
        timezone.get_current_timezone_name(),
    )
    return _entries.get_or_make(
        key,
        -math.inf,  # the key is the content: never stale
        lambda: (timeline_rows.entry_html(event), timeline_rows.entry_html(event, oob=True)),
    )


class ListPage(LivePage):
    """The task list: rows replaced in place; on the first page of the unfiltered list, a row the
    page does not show is added at the top once if its task is new to it (pick).

    A row's stale mark depends on its server and on the worker holding the task, so a server's
    health is sent as one mark per worker that the page puts into every row of that server and
    worker (`.stale-mark[data-server=…][data-held-by=…]`), however many; a disabled server's as one
    mark for all its rows."""

    def __init__(
        self,
        roles: tuple[tuple[str, bool], ...],
        page_since: datetime,
        *,
        fresh: bool,
        shown: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(roles, page_since)
        self.fresh = fresh
        self.shown = set(shown)  # the rows the page shows (it names them), and those added since
        self.locale = tuple(name for name, _ in roles if name.startswith(("language:", "zone:")))
        self.marks: dict[
            int, dict[str, str]
        ] = {}  # the stale marks this socket last sent, per server and holder

    def groups(self) -> list[str]:
        return [events.TASKS, events.SERVERS]

    def share_key(self) -> tuple[Any, ...]:
        return (*super().share_key(), self.fresh)

    remembers = True

    def blank(self) -> "ListPage":
        return ListPage(self.roles, self.page_since, fresh=self.fresh)

    def pick(self, choice: Choice) -> bool:
        """A row the fresh page does not show is added at its top if its task started after the
        page's time, or within MARGIN before it (a task committed between the page's time and its
        query, or by a process whose clock differs, is not on the page); an older one is on a
        later page. The page names the rows it shows (`rows`); a row once added is shown, and
        replaced in place from then on."""
        created, pk = choice.key
        if not self.fresh or pk in self.shown or created < self.page_since - MARGIN:
            return False
        self.shown.add(pk)
        return True

    def catch_up(self, since: datetime) -> list[Item] | None:
        changed = tasks_changed_since(since, settings.LIVE_CATCH_UP_LIMIT)
        if changed is None:
            return None
        # Servers stale now, or whose health moved since (failed, recovered: a success is recorded).
        health = (
            Q(enabled=False)
            | Q(consecutive_failures__gt=0)
            | Q(last_success_at__gte=since)
            | Q(last_error_at__gte=since)
        )
        servers = _at_most(McpServer.objects.filter(health).values_list("id", flat=True), SERVERS_CAUGHT_UP)
        if servers is None:
            return None
        return [("task", pk) for pk in changed] + [("server", pk) for pk in servers]

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        return await self.fragments_many({item: not_before})

    async def fragments_many(self, due: dict[Item, float]) -> list[Part]:
        # Rows in batches: every row that sockets of this audience need in this turn, in one
        # database step (tasksapp/live/fanout.py), and one await for all of this flush's rows.
        asked = [(pk, at) for (kind, pk), at in due.items() if kind == "task"]
        # A row reads the same for every role (its checkbox, its words): one batch per language and
        # zone, shared by the rooms of both roles.
        rows = await fanout.render_many(("row", self.locale), asked, self._render_rows)
        fragments: list[Part] = []
        for (kind, pk), at in due.items():
            if kind == "server":
                fragments += await self._stale_mark(pk, at)
            elif kind == "task" and (row := rows.get(pk)) is not None:
                created, replace, insert = row
                if self.fresh:  # at the top of a page rendered before the task started (pick)
                    fragments.append(Choice(f"task-row-{pk}", (created, pk), insert, replace))
                else:
                    fragments.append((f"task-row-{pk}", replace))
        return fragments

    async def _stale_mark(self, pk: int, not_before: float) -> list[Part]:
        """The server's stale marks into the rows of that server on the page: one for all of them
        while it is disabled, else one per worker that reported on it, into the rows of the tasks
        that worker holds (htmx swaps an out-of-band element into all elements its selector matches)."""
        # Keyed by the audience too: what the mark says may depend on it (the page's language).
        marks = await shared.render(
            ("stale-mark", pk, self.roles), not_before, lambda: self._render_marks(pk)
        )
        if marks is None:
            return []
        sent, self.marks[pk] = self.marks.get(pk, {}), marks
        if sent.get(EVERY_ROW) != marks[EVERY_ROW]:
            # Disabled or enabled again (or the first mark): every row of the server, then the rows
            # of each holder again.
            changed = {holder: mark for holder, mark in marks.items() if holder == EVERY_ROW or mark}
        else:  # a view moved; a worker no longer reporting has its rows cleared
            holders = sent.keys() | marks.keys()
            changed = {h: marks.get(h, "") for h in holders if sent.get(h, "") != marks.get(h, "")}
        return [self._mark_fragment(pk, holder, mark) for holder, mark in changed.items()]

    @staticmethod
    def _mark_fragment(pk: int, holder: str, mark: str) -> Fragment:
        extra = "" if holder == EVERY_ROW else f"[data-held-by='{holder}']"
        target = f"#task-rows .stale-mark[data-server='{pk}']{extra}"
        return (RELOAD_REGION, f'<span hx-swap-oob="innerHTML:{target}">{mark}</span>')

    def _render_marks(self, pk: int) -> dict[str, str] | None:
        """{holder key: mark}: EVERY_ROW first (the disabled mark, or empty), then the rows nobody
        holds ("": the server's last word), then one per worker's view."""
        fields = ("name", "enabled", "consecutive_failures", "failing_since")
        found = McpServer.objects.filter(pk=pk).only(*fields).first()
        if found is None:
            return None
        template = "tasksapp/task_list.html#stale-flag"

        def mark(failing_since: datetime | None) -> str:
            return render_to_string(template, {"server": found, "failing_since": failing_since}).strip()

        marks = {EVERY_ROW: mark(None)}
        if found.enabled:
            marks[""] = mark(found.failing_since if found.consecutive_failures else None)
            views = ServerHealth.objects.filter(server_id=pk)
            for worker, since, failures in views.values_list(
                "worker", "failing_since", "consecutive_failures"
            ):
                marks[holder_key(worker)] = mark(since if failures else None)
        return marks

    def _render_rows(self, pks: list[int]) -> dict[int, tuple[datetime, str, str]]:
        """(created, the fragment replacing the row, the fragment adding it at the top) of each
        task that exists, in one query: built once for all the sockets that send it."""
        rows: dict[int, tuple[datetime, str, str]] = {}
        for task in RemoteTask.objects.for_list().filter(pk__in=pks):
            # What the page's partial task_list.html#task-row writes, without the template engine.
            replace, plain = task_rows.row_html(task, oob=True), task_rows.row_html(task, oob=False)
            rows[task.pk] = (
                task.created_at,
                f"<template>{replace}</template>",
                f'<template><tr id="task-row-{task.pk}" hx-swap-oob="delete"></tr></template>'
                '<template><tr id="task-rows-empty" hx-swap-oob="delete"></tr></template>'
                f'<template><tbody hx-swap-oob="afterbegin:#task-rows">{plain}</tbody></template>',
            )
        return rows


class InboxPage(LivePage):
    """The inbox: a task's questions replaced in place, added at the end when new to this page.
    Only questions matching the page's filters (server, tool, kind: its socket URL carries them)."""

    def __init__(
        self,
        roles: tuple[tuple[str, bool], ...],
        page_since: datetime,
        filters: dict[str, str] | None = None,
        named: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(roles, page_since)
        self.named = named  # the tasks the page shows (it names them)
        self.shown: set[int] = set(named)
        self.filters = filters or {}
        self.filter_key = tuple(sorted(self.filters.items()))  # renders are shared per filter

    def groups(self) -> list[str]:
        return [events.INBOX]

    def share_key(self) -> tuple[Any, ...]:
        return (*super().share_key(), self.filter_key)

    def blank(self) -> "InboxPage":
        return InboxPage(self.roles, self.page_since, self.filters)

    def pick(self, choice: Choice) -> bool:
        """A task's questions are added at the end of a page that does not show them yet."""
        if choice.key in self.shown:
            return False
        self.shown.add(choice.key)
        return True

    def catch_up(self, since: datetime) -> list[Item] | None:
        # What the page shows (it names its tasks), and the questions seen long enough before the
        # page's time to be on it or on a later page: a question seen within MARGIN of it and not
        # named (committed between the page's time and its query) is added at the end.
        self.shown = set(self.named) | set(
            inbox_view.filtered_open(self.filters)
            .filter(first_seen_at__lt=self.page_since - MARGIN)
            .values_list("task_id", flat=True)
        )
        changed = tasks_changed_since(since, settings.LIVE_CATCH_UP_LIMIT)
        return None if changed is None else [("task", pk) for pk in changed]

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        kind, pk = item
        if kind != "task":
            return []
        key = ("inbox", pk, self.roles, self.filter_key)
        found = await shared.render(key, not_before, lambda: self._render(pk))
        if found is None:
            return []
        asking, replace, plain = found
        element_id = f"inbox-task-{pk}"
        if not asking:
            return [(element_id, replace)]
        insert = (
            f'<div id="{element_id}" hx-swap-oob="delete"></div>'
            f'<div hx-swap-oob="beforeend:#inbox-items">{plain}</div>'
        )  # the "nothing is waiting" line hides itself beside a row (app.css): two questions added
        # in one frame each removed it, and the second found nothing to remove (htmx logged an error)
        return [Choice(element_id, pk, insert, replace)]  # added where the page does not show it (pick)

    def _render(self, pk: int) -> tuple[bool, str, str] | None:
        task = RemoteTask.objects.select_related("server").filter(pk=pk).first()
        if task is None:
            return None
        rows = inbox_view.filtered_open(self.filters).filter(task=task)
        rows = rows.select_related("task__server", "task__agent")
        live = not task.is_terminal and not task.expired
        item = {"task": task, "inputs": [input_view(row) for row in rows] if live else []}
        context = {"item": item, "request": _Request("/inbox/"), **self.flags}
        template = "tasksapp/inbox.html#inbox-task"
        return (
            bool(item["inputs"]),
            render_to_string(template, {**context, "oob": True}),
            render_to_string(template, {**context, "oob": False}),
        )


class OverviewPage(LivePage):
    """The overview aggregates every task: one render a second at most, shared by all viewers."""

    def __init__(self, roles: tuple[tuple[str, bool], ...], page_since: datetime) -> None:
        super().__init__(roles, page_since)
        self.coalesce = settings.LIVE_OVERVIEW_SECONDS

    def groups(self) -> list[str]:
        return [events.TASKS, events.SERVERS]

    def catch_up(self, since: datetime) -> list[Item] | None:
        return [("overview", 0)]

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        # Not the thread-sensitive thread (shared.render): an expensive aggregate must not queue
        # behind the worker's writes.
        html = await shared.render(("overview", self.roles), not_before, self._render)
        return [("overview-live", html)]

    def _render(self) -> str:
        from tasksapp.presenters.overview import overview_context

        context = {**overview_context(), "oob": True, **self.flags}
        return render_to_string("tasksapp/overview.html#overview-live", context)


class ServersPage(LivePage):
    def groups(self) -> list[str]:
        return [events.SERVERS]

    def catch_up(self, since: datetime) -> list[Item] | None:
        servers = _at_most(McpServer.objects.values_list("id", flat=True), SERVERS_CAUGHT_UP)
        return None if servers is None else [("server", pk) for pk in servers]

    async def fragments(self, item: Item, not_before: float) -> list[Part]:
        kind, pk = item
        if kind != "server":
            return []
        html = await shared.render(("server", pk, self.roles), not_before, lambda: self._render(pk))
        return [(f"server-row-{pk}", f"<template>{html}</template>")] if html else []

    def _render(self, pk: int) -> str:
        server = McpServer.objects.filter(pk=pk).select_related("authorization").first()
        if server is None:
            return ""
        return render_to_string(
            "tasksapp/servers.html#server-row", {"server": server, "oob": True, **self.flags}
        )


def page_for(
    page: str, params: dict[str, str], roles: tuple[tuple[str, bool], ...], since: datetime
) -> LivePage | None:
    if page == "task" and (task := parse_id(params.get("task"))) is not None:
        return TaskPage(roles, since, task, parse_count(params.get("show"), limit=SHOW_LIMIT))
    if page == "tasks":
        return ListPage(roles, since, fresh=params.get("fresh") == "1", shown=_ids(params.get("rows", "")))
    if page == "inbox":
        return InboxPage(roles, since, inbox_view.inbox_filters(params), named=_ids(params.get("items", "")))
    simple: dict[str, type[LivePage]] = {"overview": OverviewPage, "servers": ServersPage}
    return simple[page](roles, since) if page in simple else None


def _ids(text: str, limit: int = 200) -> frozenset[int]:
    """The row ids a page names (`rows=3,2,1`): at most `limit`, anything not an id left out."""
    return frozenset(pk for part in text.split(",")[:limit] if (pk := parse_id(part)) is not None)


MARGIN = timedelta(seconds=5)  # clocks of web and worker processes differ; pages take time to render
