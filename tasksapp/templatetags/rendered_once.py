"""`{% rendered_once key… %}…{% endrendered_once %}`: a part of a page rendered once per key, language
and zone, then reused (per process, the most recently used kept up to RENDERED_ONCE_BYTES in all;
a part longer than RENDERED_ONCE_PART is rendered every time, never kept).

For what is the same for every reader who sees it the same way and slow to render: an unbound answer
form (templates/tasksapp/_input_request.html), where each field is a label, a widget, a help text and
an error list. A page of 10 questions spent most of its time there (docs/benchmarks.md, *Pages
beside their SQL*). The keys must name everything the part shows: the question as asked
(InputView.fingerprint), the reader's permissions, where the form posts and returns.

The CSRF token is each reader's own: the part is rendered with a stand-in token, and each page gets
its own `{% csrf_token %}` in its place. `unless=…` true renders the part every time (a form given an
answer shows that answer and its errors).
"""

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from django import template
from django.template.base import FilterExpression, NodeList, Parser, Token
from django.template.defaulttags import CsrfTokenNode
from django.utils import timezone, translation
from django.utils.safestring import SafeString, mark_safe

register = template.Library()
RENDERED_ONCE_BYTES = 8 * 1024 * 1024  # kept per process, in characters (a form's card is a few thousand)
RENDERED_ONCE_PART = 256 * 1024  # a longer part (a server's huge schema) is not kept
_STAND_IN = f"csrf-stand-in-{secrets.token_hex(16)}"  # no page holds this token
_STAND_IN_INPUT = f'<input type="hidden" name="csrfmiddlewaretoken" value="{_STAND_IN}">'


class _Kept:
    """The parts rendered, at most `size` characters in all, the least recently used dropped first;
    safe across a process's threads."""

    def __init__(self, size: int, part: int) -> None:
        self.size, self.part, self.held = size, part, 0
        self._items: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> str | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], value: str) -> None:
        if len(value) > self.part:
            return
        with self._lock:
            before = self._items.pop(key, None)
            self.held += len(value) - (len(before) if before is not None else 0)
            self._items[key] = value
            while self.held > self.size:
                _, dropped = self._items.popitem(last=False)
                self.held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.held = 0

    def __len__(self) -> int:
        return len(self._items)


kept = _Kept(RENDERED_ONCE_BYTES, RENDERED_ONCE_PART)


def once(
    context: Any, name: str, keys: Iterable[Any], render: Callable[[], str], *, token: str | None = None
) -> SafeString:
    """`render()`'s part, rendered once per `name`, `keys`, language and zone (the tag's work, for a
    caller in Python: {% inbox_task %}). The part's {% csrf_token %} becomes the reader's (`token`,
    that {% csrf_token %} if the caller has it already)."""
    key = (
        name,
        translation.get_language(),
        timezone.get_current_timezone_name(),
        *(str(key) for key in keys),
    )
    part = kept.get(key)
    if part is None:
        with context.push(csrf_token=_STAND_IN):
            part = render()
        kept.put(key, part)
    own = CsrfTokenNode().render(context) if token is None else token  # the reader's ("" if none)
    return mark_safe(part.replace(_STAND_IN_INPUT, own))  # noqa: S308 (the template's own output)


class RenderedOnceNode(template.Node):
    def __init__(
        self, nodelist: NodeList, name: str, keys: list[FilterExpression], unless: FilterExpression | None
    ):
        self.nodelist, self.name, self.keys, self.unless = nodelist, name, keys, unless

    def render(self, context: Any) -> SafeString:
        if self.unless is not None and self.unless.resolve(context):
            return mark_safe(self.nodelist.render(context))  # noqa: S308 (the template's own output)
        keys = [key.resolve(context) for key in self.keys]
        return once(context, self.name, keys, lambda: self.nodelist.render(context))


@register.tag("rendered_once")
def rendered_once(parser: Parser, token: Token) -> RenderedOnceNode:
    """{% rendered_once "name" key1 key2… [unless=expression] %}…{% endrendered_once %}"""
    bits = token.split_contents()[1:]
    if not bits:
        raise template.TemplateSyntaxError("rendered_once needs a name and its keys")
    unless = None
    keys = []
    for bit in bits[1:]:
        if bit.startswith("unless="):
            unless = parser.compile_filter(bit.removeprefix("unless="))
        else:
            keys.append(parser.compile_filter(bit))
    nodelist = parser.parse(("endrendered_once",))
    parser.delete_first_token()
    return RenderedOnceNode(nodelist, bits[0].strip("\"'"), keys, unless)
