"""What a browser submits for a rendered form: the controls' values as POST data, after the user's
changes."""

from html.parser import HTMLParser
from typing import Any

from django.utils.datastructures import MultiValueDict


class _Controls(HTMLParser):
    """Collects what a browser would submit for the controls in a piece of HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pairs: list[tuple[str, str]] = []
        self._select: tuple[str, bool, list[str], list[str]] | None = None
        self._textarea: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {key: value or "" for key, value in attrs}
        name = attr.get("name", "")
        if tag == "input" and attr.get("type") in ("checkbox", "radio"):
            if "checked" in attr:
                self.pairs.append((name, attr.get("value", "on")))
        elif tag == "input":
            self.pairs.append((name, attr.get("value", "")))
        elif tag == "select":
            self._select = (name, "multiple" in attr, [], [])
        elif tag == "option" and self._select is not None:
            self._select[2].append(attr.get("value", ""))
            if "selected" in attr:
                self._select[3].append(attr.get("value", ""))
        elif tag == "textarea":
            self._textarea = (name, [])

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            name, multiple, options, selected = self._select
            chosen = selected if multiple or selected else options[:1]
            self.pairs.extend((name, value) for value in chosen[-1:] if not multiple)
            self.pairs.extend((name, value) for value in chosen if multiple)
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            text = "".join(self._textarea[1])
            self.pairs.append((self._textarea[0], text.removeprefix("\n")))
            self._textarea = None


def browser_submit(html: str, changes: dict[str, Any] | None = None) -> MultiValueDict[str, str]:
    """The POST data a browser sends for the rendered form, after the user makes changes.

    A change of None clears the control (unticks checkboxes); a list sets a multi-select.
    """
    parser = _Controls()
    parser.feed(html)
    data: MultiValueDict[str, str] = MultiValueDict()
    for name, value in parser.pairs:
        data.appendlist(name, value)
    for name, value in (changes or {}).items():
        data.setlist(name, [] if value is None else value if isinstance(value, list) else [value])
    return data
