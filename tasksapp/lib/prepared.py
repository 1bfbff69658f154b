"""Queries compiled once and run again with new values: for the reads a live page makes per change,
and the small reads every page makes.

Django compiles a queryset to SQL every time it runs it. For a task's page that compilation was
most of the cost of reading the task (1.5 ms of CPU of its 2.1 ms; the SQL itself, 0.1 ms), and a
busy task's page reads it once per change (docs/live.md, *What a change costs*). A `Prepared`
query builds and compiles its queryset once per thread and database connection, with stand-in
values in place of the caller's, and from then on runs the same SQL with the caller's values put
where the stand-ins were. The rows are made exactly as the queryset's own would make them (its
own iterable, Django's ModelIterable or that of values() or values_list(), on the compiled query).
A query without values (arity 0) is compiled once and run as it is.

`count(*values)` runs `SELECT COUNT(*)` over the same SQL (a query whose rows are only counted, e.g.
a union of ids). Values are ints, strings and aware datetimes (written as the connection writes a
datetime column's value).

Only values that reach the SQL as parameters may vary (`pk=…`, `task_id=…`); anything compiled
into the SQL's text (a slice's LIMIT, a field name) belongs in the shape, and queries of different
shapes are different `Prepared`. That a value is a parameter is checked when the query is compiled:
each stand-in must appear exactly once among the parameters, or `Prepared` refuses the query.
"""

import itertools
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import QuerySet

_STAND_IN_BASE = -(2**31) + 7_919  # ints no query here is asked about (primary keys are positive)
_STAND_IN_TIME = datetime(1901, 2, 3, 4, 5, 6, 7_919, tzinfo=UTC)  # a time no query here asks about
type Value = int | str | datetime


@dataclass
class _Compiled:
    queryset: QuerySet[Any]
    compiler: Any  # django.db.models.sql.compiler.SQLCompiler: it keeps what the rows need
    sql: str
    params: tuple[Any, ...]
    slots: tuple[int, ...]  # where each value goes in `params`
    kinds: tuple[type, ...]  # each value's type
    writers: tuple[Callable[[Any], Any], ...]  # each value as its parameter (a datetime on SQLite: a string)


class _Query:
    """The compiled queryset's query, whose compiler runs this run's SQL without compiling again."""

    def __init__(self, compiled: _Compiled, params: tuple[Any, ...]) -> None:
        self._query = compiled.queryset.query
        self._compiler = compiled.compiler
        self._sql = compiled.sql
        self._params = params

    def __getattr__(self, name: str) -> Any:  # what an iterable reads of the query (its columns' names)
        return getattr(self._query, name)

    def get_compiler(self, using: str | None = None) -> Any:
        # execute_sql asks the compiler for its SQL: this run's, without compiling again. The
        # compiler is this thread's own (one query at a time), so setting it here is safe.
        sql, params = self._sql, self._params
        self._compiler.as_sql = lambda *args, **kwargs: (sql, params)
        return self._compiler


class _Run:
    """What the queryset's iterable (models, values, values_list) reads of a queryset, with the
    compiled query in place of a new one."""

    def __init__(self, compiled: _Compiled, params: tuple[Any, ...]) -> None:
        queryset = compiled.queryset
        self.db = queryset.db
        self.model = queryset.model
        self._fetch_mode = queryset._fetch_mode  # type: ignore[attr-defined]  # Django 6.1
        self._known_related_objects: dict[Any, Any] = {}  # the stand-ins' objects are nobody's
        self._fields = queryset._fields  # type: ignore[attr-defined]
        self.query = _Query(compiled, params)
        self.iterable: Any = queryset._iterable_class


class Prepared[R]:
    """`make(*values)`'s rows (models, or what its values() or values_list() makes), compiled once
    per thread and connection (see the module)."""

    def __init__(self, make: Callable[..., "QuerySet[Any, R]"], arity: int) -> None:
        self.make = make
        self.arity = arity
        self._local = threading.local()

    def all(self, *values: Value) -> list[R]:
        compiled, params = self._run(values)
        run = _Run(compiled, params)
        rows: list[R] = list(run.iterable(run))
        return rows

    def first(self, *values: Value) -> R | None:
        found = self.all(*values)
        return found[0] if found else None

    def count(self, *values: Value) -> int:
        """How many rows the query has: one COUNT(*) over its SQL."""
        compiled, params = self._run(values)
        with compiled.compiler.connection.cursor() as cursor:
            # The SQL is Django's own compilation of the queryset; the values are parameters.
            cursor.execute(f"SELECT COUNT(*) FROM ({compiled.sql}) prepared_count", params)  # noqa: S608
            return int(cursor.fetchone()[0])

    def _run(self, values: tuple[Value, ...]) -> tuple[_Compiled, tuple[Any, ...]]:
        if len(values) != self.arity:
            raise TypeError(f"{self.arity} values expected, {len(values)} given")
        compiled = self._compiled(values)
        params = list(compiled.params)
        for slot, kind, write, value in zip(
            compiled.slots, compiled.kinds, compiled.writers, values, strict=True
        ):
            if type(value) is not kind:  # as compiled: an int for an int
                raise TypeError(f"a prepared query takes {kind.__name__}, not {type(value).__name__}")
            if isinstance(value, datetime) and value.tzinfo is None:
                raise TypeError("a prepared query takes aware datetimes")
            params[slot] = write(value)
        return compiled, tuple(params)

    def _compiled(self, values: tuple[Value, ...]) -> _Compiled:
        """This thread's compiled query, made again when its connection is not the same object."""
        compiled: _Compiled | None = getattr(self._local, "compiled", None)
        if compiled is not None and compiled.compiler.connection is connections[compiled.queryset.db]:
            return compiled
        stand_ins = tuple(_stand_in(value, index) for index, value in enumerate(values))
        queryset = self.make(*stand_ins)
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        slots, writers = [], []
        for stand_in in stand_ins:
            write = _writer(stand_in, compiler.connection)
            written = write(stand_in)
            found = [i for i, param in enumerate(params) if type(param) is type(written) and param == written]
            if len(found) != 1:
                raise ValueError(
                    f"a prepared query's value must be one of its parameters ({len(found)} found)"
                )
            slots.append(found[0])
            writers.append(write)
        kinds = tuple(type(stand_in) for stand_in in stand_ins)
        compiled = _Compiled(queryset, compiler, sql, tuple(params), tuple(slots), kinds, tuple(writers))
        self._local.compiled = compiled
        return compiled


_counter = itertools.count()


def _stand_in(value: Hashable, index: int) -> Value:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise TypeError("a prepared query takes aware datetimes")
        return _STAND_IN_TIME + timedelta(microseconds=index)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"a prepared query takes ints, strings and datetimes, not {type(value).__name__}")
    if isinstance(value, int):
        return _STAND_IN_BASE + index
    return f"\x00prepared-stand-in-{index}-{next(_counter)}"


def _same(value: Any) -> Any:
    return value


def _writer(stand_in: Value, connection: Any) -> Callable[[Any], Any]:
    """How a value becomes its parameter: as it is, or a datetime as the connection writes a
    datetime column's (SQLite: a string in UTC)."""
    if isinstance(stand_in, datetime):
        return connection.ops.adapt_datetimefield_value  # type: ignore[no-any-return]
    return _same
