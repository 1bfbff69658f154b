"""Whole numbers read from query strings and form fields: database ids and small counts.

`str.isdigit()` accepts "²" (which int() refuses) and "١٢" (which it reads), and twenty digits
overflow the 64-bit integers of SQLite and PostgreSQL: either made a hand-edited URL a 500, or a
streamed export that never finished. These accept ASCII digits only, within range.
"""

from collections.abc import Iterable, Mapping

MAX_ID = 2**63 - 1  # the largest BigAutoField value (and SQLite's INTEGER)


def parse_id(text: object) -> int | None:
    """The id `text` spells in ASCII digits, 1 to MAX_ID; None for anything else (empty included)."""
    value = str(text if text is not None else "")
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_ID)):
        return None
    number = int(value)
    return number if 0 < number <= MAX_ID else None


def parse_count(text: object, *, limit: int) -> int:
    """A count of rows to show: ASCII digits up to `limit`; 0 (the default) for anything else."""
    value = str(text if text is not None else "")
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(limit)):
        return 0
    return min(int(value), limit)


def bad_ids(params: Mapping[str, str], keys: Iterable[str]) -> list[str]:
    """The keys among `keys` whose value is given but is not an id (what a page says it ignored)."""
    return [key for key in keys if params.get(key) and parse_id(params[key]) is None]
