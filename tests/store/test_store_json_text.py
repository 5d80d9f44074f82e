"""The store's JSON text (`store/json_text.py`): whatever writes it (orjson, or `json.dumps`
where orjson would say something else), it reads back as `json.dumps`'s text would, and
rows an older mindloop wrote with `json.dumps` read as before — on the fast path and
through SQLAlchemy."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.store import DialogRecord, MessageRecord, Store
from mindloop.store.json_text import dumps, loads
from tests.store.stores import open_store

pytestmark = pytest.mark.sqlite_only  # the text SQLite stores; PostgreSQL's is its own


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (1 is not 1.0 nor True; NaN is NaN; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


_TEXT = st.one_of(
    st.text(),
    st.text(st.characters(codec="utf-8")),
    st.sampled_from(["\ud800", "a\udfffb", "NaN", "null", "Infinity", "é€😀", "\x00\u2028"]),
)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-(2**62)),
    st.floats(),  # NaN and ±Infinity included
    _TEXT,
)
_KEY = st.one_of(_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_TEXT, inner, max_size=4),
        st.dictionaries(_KEY, inner, max_size=3),
    ),
    max_leaves=12,
)


@given(_VALUE)
@settings(max_examples=400, deadline=None)
def test_the_text_reads_back_as_json_dumps_text_does(value: Any) -> None:
    expected = json.loads(json.dumps(value))
    text = dumps(value)
    assert isinstance(text, str)
    assert _same(json.loads(text), expected)
    assert _same(loads(text), expected)
    assert _same(loads(json.dumps(value)), expected)  # rows an older mindloop wrote


@pytest.mark.parametrize(
    ("value", "text"),
    [  # where orjson would write something else: `json.dumps` writes it
        ({"cost": float("nan"), "node": None}, '{"cost": NaN, "node": null}'),
        ([None, float("inf"), -float("inf")], "[null, Infinity, -Infinity]"),
        ({1: "a", None: "b"}, '{"1": "a", "null": "b"}'),
        ({"n": 2**70}, '{"n": 1180591620717411303424}'),
        ({"s": "\ud800"}, '{"s": "\\ud800"}'),
    ],
)
def test_what_orjson_says_otherwise_is_written_by_json(value: Any, text: str) -> None:
    assert dumps(value) == text
    assert _same(loads(text), json.loads(text))


def test_plain_values_are_written_compactly() -> None:
    assert dumps({"a": [1, 2.5, None, True], "é": "x"}) == '{"a":[1,2.5,null,true],"é":"x"}'
    assert dumps({"s": "null", "f": 1.5}) == '{"s":"null","f":1.5}'  # no NaN in it


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "value", [datetime.datetime(2024, 1, 1), _Point(1), {1, 2}, b"x", object()]
)
def test_what_json_refuses_is_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps({"v": value})
    with pytest.raises(TypeError):
        dumps({"v": value})


_AWKWARD = {
    "nan": {"cost": float("nan"), "node": None},
    "inf": [float("inf"), -float("inf")],
    "big": 2**70,
    "neg": -(2**70),
    "keys": {1: "one"},
    "lone": "\ud800",
    "text": "é€😀 \x00",
    "none": None,
    "floats": [0.1, -0.0, 1e-07, 1e300],
}


@pytest.mark.parametrize("kind", ["sqlite", "sqlite-core"])
def test_awkward_values_round_trip_through_the_store(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "state.sqlite"
    store = open_store(db, kind)
    store.create_dialog(DialogRecord(id="d", root_id="d", member="dev", task_path="t.tsk"))
    # one message each (one whose text orjson refuses is written whole by `json.dumps`)
    store.append_messages([_message({k: v}) for k, v in _AWKWARD.items()])
    store.close()
    again = open_store(db, kind)  # nothing kept: parsed from the file
    read = [m.data for m in again.load_history("d")]
    again.close()
    expected = [{k: v} for k, v in (_AWKWARD | {"keys": {"1": "one"}}).items()]
    assert _same(read, expected)


def _message(data: dict[str, Any]) -> MessageRecord:
    return MessageRecord(dialog_id="d", course=1, kind="user", data=data)


@pytest.mark.parametrize("kind", ["sqlite", "sqlite-core"])
def test_rows_written_by_json_dumps_read_as_before(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "state.sqlite"
    made = Store(db)
    made.create_dialog(DialogRecord(id="d", root_id="d", member="dev", task_path="t.tsk"))
    made.close()
    con = sqlite3.connect(db)
    datas = [{"text": "héllo 😀", "n": 2**70, "x": [1.5, None]}, {"nan": float("nan")}]
    for data in datas:
        con.execute(
            "INSERT INTO messages (dialog_id, course, kind, data, created_at)"
            " VALUES ('d', 1, 'user', ?, 0)",
            (json.dumps(data),),  # spaces, \\u escapes: as an older mindloop wrote them
        )
    con.commit()
    con.close()
    store = open_store(db, kind)
    read = [m.data for m in store.load_history("d")]
    store.close()
    assert _same(read, datas)
