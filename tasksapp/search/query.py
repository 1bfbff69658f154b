"""The search box: what people type, turned into an FTS5 MATCH or a PostgreSQL tsquery.

Syntax (docs/operator.md): words must all appear, each as the start of a word (`slow` finds
`slow_count`); "a quoted phrase" must appear as written; -word leaves out tasks containing it
(beside at least one wanted word: alone it is read as a word).
Only letters and digits reach the database engine's query language, so nothing typed can change
the query's shape.
"""

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from tasksapp.search.index import TABLE

_TERM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')
_WORD = re.compile(r"\w+")
MAX_TERMS = 16


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]
    phrase: bool
    excluded: bool


def parse(text: str) -> list[Term]:
    """The terms of a search, lower-cased words only; at most MAX_TERMS."""
    terms = []
    for match in _TERM.finditer(text):
        quoted_minus, quoted, minus, bare = match.groups()
        words = tuple(word.lower() for word in _WORD.findall(quoted if bare is None else bare))
        if words:
            terms.append(Term(words, phrase=bare is None, excluded=bool(quoted_minus or minus)))
    return terms[:MAX_TERMS]


def fts5_query(terms: list[Term]) -> str:
    """`"slow"* AND "counted 5"` ... NOT "x"*: a phrase matches exactly, anything else by prefix."""

    def one(term: Term) -> str:
        return f'"{" ".join(term.words)}"' + ("" if term.phrase else "*")

    wanted = " AND ".join(one(term) for term in terms if not term.excluded)
    unwanted = "".join(f" NOT {one(term)}" for term in terms if term.excluded)
    return wanted + unwanted


def tsquery(terms: list[Term]) -> str:
    """The same search for PostgreSQL's to_tsquery('simple', ...)."""

    def one(term: Term) -> str:
        lexemes = [f"'{word}'" for word in term.words]
        if not term.phrase:
            lexemes[-1] += ":*"
        joined = " <-> ".join(lexemes)
        return f"!({joined})" if term.excluded else f"({joined})"

    ordered = sorted(terms, key=lambda term: term.excluded)  # tsquery needs a positive term first
    return " & ".join(one(term) for term in ordered)


def matching(text: str) -> Q | None:
    """A filter for tasks whose document matches `text`; None when nothing searchable was typed.

    One query with the list it filters: `id IN (SELECT ... FROM the index)`.
    """
    terms = parse(text)
    if not terms:
        return None
    if connection.vendor not in ("sqlite", "postgresql"):
        return _substring(terms)  # another database: no index, but the same meaning
    if all(term.excluded for term in terms):
        # Nothing wanted, only -words: read them as words. A pasted value that starts with "-" (a
        # task id can) must not turn into "every task but this one" and list them all.
        terms = [Term(term.words, term.phrase, excluded=False) for term in terms]
    return Q(_in_index(_one_of(connection.vendor, terms)))


def _one_of(vendor: str, terms: list[Term]) -> str:
    return fts5_query(terms) if vendor == "sqlite" else tsquery(terms)


def _in_index(query: str) -> RawSQL:
    """`id IN (matches)` as a condition. On SQLite the `+` keeps the planner walking the list's own
    order (created_at index) and probing the matches, instead of fetching every match and sorting:
    a word in 70% of 100k tasks costs 10 ms rather than 280 ms."""
    # The typed text travels as a parameter; only constant names are formatted in.
    if connection.vendor == "sqlite":
        matches = f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH %s"  # noqa: S608
        sql = f'+"tasksapp_remotetask"."id" IN ({matches})'
    else:
        matches = f"SELECT task_id FROM {TABLE} WHERE document @@ to_tsquery('simple', %s)"  # noqa: S608
        sql = f'"tasksapp_remotetask"."id" IN ({matches})'
    return RawSQL(sql, [query], output_field=BooleanField())  # noqa: S611


def _substring(terms: list[Term]) -> Q:
    found = Q()
    for term in terms:
        text = " ".join(term.words)
        one = Q(tool_name__icontains=text) | Q(status_message__icontains=text)
        found &= ~one if term.excluded else one
    return found
