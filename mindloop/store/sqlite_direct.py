"""Running the store's prebuilt statements on SQLite's DBAPI connection (the fast path).

SQLAlchemy writes the SQL: each statement is compiled once per set of parameter keys for
the engine's dialect. What is skipped is SQLAlchemy's per-call execution machinery
(execution contexts, events, result objects): about 20 µs a call, several times the
SQLite work of a one-row insert, and the runtime makes a handful of such calls per step.
Type handling that SQLAlchemy would do is done here for the two types that need it in
SQLite: JSON (serialised on the way in, parsed on the way out, both by `json_text`) and
Boolean (read back as bool). Only the SQLite dialect (`mindloop.store.sqlite`) uses this
module; other dialects run every statement through SQLAlchemy.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from mindloop.store import json_text

_Convert = Callable[[Any], Any]
_ConvertColumn = Callable[[Sequence[Any]], list[Any]]
_NEED = object()  # a bind the caller must supply


def _json_column(values: Sequence[Any]) -> list[Any]:
    """Parse a column of JSON texts in one parse of them joined as an array: the parser's
    per-call overhead is most of the cost of a small document, and a long history is
    parsed at every drive's start (2,000 messages: 1.7 ms one by one, 0.6 ms joined)."""
    loads = json_text.loads
    try:
        return list(loads("[" + ",".join(["null" if v is None else v for v in values]) + "]"))
    except TypeError:  # a value SQLite stored as a number (JSON columns have NUMERIC affinity)
        return [v if v is None or not isinstance(v, str | bytes) else loads(v) for v in values]


def _bool_column(values: Sequence[Any]) -> list[Any]:
    return [None if v is None else bool(v) for v in values]


def _from_db(type_: sa.types.TypeEngine[Any]) -> _ConvertColumn | None:
    """How a column's values come back (None stays None), a whole column at a time."""
    if isinstance(type_, sa.JSON):
        return _json_column
    if isinstance(type_, sa.Boolean):
        return _bool_column
    return None


def _to_db(type_: sa.types.TypeEngine[Any]) -> _Convert | None:
    if isinstance(type_, sa.JSON):
        return json_text.dumps
    return None


@dataclass(frozen=True)
class Compiled:
    """One statement as the DBAPI runs it: SQL text, parameter order, converters."""

    sql: str
    names: tuple[str, ...]  # bind names in positional order
    defaults: tuple[Any, ...]  # values of literal binds (e.g. `status == "open"`), else _NEED
    to_db: tuple[_Convert | None, ...]
    keys: tuple[str, ...]  # result column names (selects)
    from_db: tuple[_ConvertColumn | None, ...]
    # Derived once (the statement runs several times a step): the caller's values taken
    # by one C-level `itemgetter` into their positions, the literal binds' values filled
    # in, and the few converters applied by index.
    _supplied: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _get: Callable[[dict[str, Any]], Any] | None = field(init=False, repr=False, compare=False)
    _convert: tuple[tuple[int, _Convert], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        supplied = tuple(i for i, d in enumerate(self.defaults) if d is _NEED)
        names = [self.names[i] for i in supplied]
        get = None
        if len(names) == 1:
            only = names[0]
            get = lambda values: (values[only],)  # noqa: E731
        elif names:
            get = operator.itemgetter(*names)
        convert = tuple((i, c) for i, c in enumerate(self.to_db) if c is not None)
        object.__setattr__(self, "_supplied", supplied)
        object.__setattr__(self, "_get", get)
        object.__setattr__(self, "_convert", convert)

    def params(self, values: dict[str, Any] | None) -> Sequence[Any]:
        get = self._get
        if get is None:
            if not self._convert:
                return self.defaults
            out = list(self.defaults)
        elif len(self._supplied) == len(self.defaults):
            if not self._convert:  # the caller's values as they are (most statements)
                return get(values or {})  # type: ignore[no-any-return]
            out = list(get(values or {}))
        else:
            out = list(self.defaults)
            for i, v in zip(self._supplied, get(values or {}), strict=True):
                out[i] = v
        for i, conv in self._convert:
            if out[i] is not None:
                out[i] = conv(out[i])
        return out

    def rows(self, raw: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Convert the columns that need it, a column at a time (the rows of a long
        history pass through here at every drive's start)."""
        if not raw or not any(self.from_db):
            return raw
        columns: list[Sequence[Any]] = list(zip(*raw, strict=True))
        for i, conv in enumerate(self.from_db):
            if conv is not None:
                columns[i] = conv(columns[i])
        return list(zip(*columns, strict=True))


def compile_for(stmt: sa.Executable, dialect: sa.Dialect, keys: Sequence[str]) -> Compiled | None:
    """Compile `stmt` for parameters `keys`, or None if the DBAPI path cannot run it
    (non-positional parameter style, expanding IN lists)."""
    compiled = stmt.compile(dialect=dialect, column_keys=list(keys))  # type: ignore[attr-defined]
    if not compiled.positional or any(b.expanding for b in compiled.binds.values()):
        return None
    names = tuple(compiled.positiontup or ())
    binds = [compiled.binds[n] for n in names]
    defaults = tuple(_NEED if b.required or b.key in keys else b.effective_value for b in binds)
    to_db = tuple(_to_db(b.type) for b in binds)
    cols: list[Any]
    if isinstance(stmt, sa.Select):
        cols = list(stmt.selected_columns)
    else:  # a write: what its RETURNING clause gives back, if it has one
        cols = list(getattr(stmt, "exported_columns", ()))
    return Compiled(
        sql=compiled.string,
        names=names,
        defaults=defaults,
        to_db=to_db,
        keys=tuple(str(c.key) for c in cols),
        from_db=tuple(_from_db(c.type) for c in cols),
    )
