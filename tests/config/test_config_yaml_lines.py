"""YAML loading with a key-path → line index."""

from __future__ import annotations

import itertools
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mindloop.config import load_yaml
from mindloop.config.problems import line_for


def test_index_and_values() -> None:
    text = "a: 1\nb:\n  c: [x, y]\n  d:\n    - e: 2\n    - 3\n"
    doc = load_yaml(text, "f.yaml")
    assert doc.problems == []
    assert doc.data == {"a": 1, "b": {"c": ["x", "y"], "d": [{"e": 2}, 3]}}
    assert doc.lines[("a",)] == 1
    assert doc.lines[("b", "c")] == 3
    assert doc.lines[("b", "d", 0, "e")] == 5
    assert doc.lines[("b", "d", 1)] == 6
    # a missing key falls back to its nearest written ancestor
    assert doc.line_for(("b", "d", 0, "nope", "deeper")) == 5
    assert line_for({}, ("x",)) is None


def test_syntax_error_is_a_problem_with_line() -> None:
    doc = load_yaml("a: 1\nb: [1, 2\nc: 3\n", "t.yaml")
    assert doc.data is None
    [problem] = doc.problems
    assert problem.file == "t.yaml" and problem.line == 3
    assert problem.message.startswith("YAML syntax error: ")
    assert str(problem).startswith("t.yaml:3: YAML syntax error")


def test_duplicate_keys_at_any_depth() -> None:
    doc = load_yaml("a:\n  b: 1\n  b: 2\na: 3\n", "t.yaml")
    assert [str(p) for p in doc.problems] == [
        "t.yaml:3: a.b: duplicate key 'b' (first written at line 2)",
        "t.yaml:4: a: duplicate key 'a' (first written at line 1)",
    ]


def test_unknown_tag_is_a_problem_not_a_crash() -> None:
    doc = load_yaml("a: !python/object:os.system x\n", "t.yaml")
    assert doc.data is None
    [problem] = doc.problems
    assert problem.line == 1 and "YAML error" in problem.message


def test_merge_keys_and_scalars_follow_safe_load() -> None:
    text = "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\nn: null\nt: yes\nf: 1.5\n"
    doc = load_yaml(text, "t.yaml")
    assert doc.problems == []
    assert doc.data == yaml.safe_load(text)
    assert doc.lines[("m", "y")] == 4


def test_empty_file_is_no_data_and_no_problem() -> None:
    doc = load_yaml("# only a comment\n", "t.yaml")
    assert doc.data is None and doc.problems == []


_keys = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True).filter(
    lambda k: k not in {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
)
_scalars = st.one_of(st.integers(-1000, 1000), st.booleans(), st.none(), st.text(max_size=10))
_trees = st.recursive(
    _scalars,
    lambda children: st.dictionaries(_keys, children, min_size=1, max_size=4),
    max_leaves=25,
)


def _paths(data: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*path, key))
            out.extend(_paths(value, (*path, key)))
    return out


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _trees, min_size=1, max_size=5), st.booleans())
def test_line_index_matches_generated_yaml(data: dict[str, object], flow_leaves: bool) -> None:
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None if flow_leaves else False)
    doc = load_yaml(text, "gen.yaml")
    assert doc.problems == []
    assert doc.data == data
    lines = text.splitlines()
    for path in _paths(data):
        line = doc.lines[path]
        written, key = lines[line - 1], path[-1]
        # the recorded line is where this key is written (as a key, not inside a value)
        assert re.search(rf"(^|[\s{{,]){re.escape(key)}:", written), (path, line, text)
        if not flow_leaves:
            assert written.startswith("  " * (len(path) - 1) + key + ":")


def _bomb(levels: int) -> str:
    names = [chr(ord("a") + i) for i in range(levels + 1)]
    text = f"{names[0]}: &{names[0]} [" + ",".join(["x"] * 10) + "]\n"
    for prev, name in itertools.pairwise(names):
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    return text


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: &a [*a]\n", 1, "an alias refers to a value that contains it"),
        ("a:\n  b: &b {c: *b}\n", 2, "an alias refers to a value that contains it"),
        ("a: 1\nb: 2001-13-45\n", 2, "invalid value '2001-13-45': month must be in 1..12"),
        (_bomb(6), 1, "too large: more than 100000 values"),
    ],
)
def test_hostile_documents_become_problems(text: str, line: int, message: str) -> None:
    doc = load_yaml(text, "t.yaml")
    assert doc.data is None
    assert [(p.line, p.message) for p in doc.problems] == [(line, message)]


def test_aliases_to_plain_values_are_fine() -> None:
    doc = load_yaml("a: &x {k: 1}\nb: *x\nc: *x\n", "t.yaml")
    assert doc.problems == [] and doc.data == {"a": {"k": 1}, "b": {"k": 1}, "c": {"k": 1}}


def test_non_scalar_key_is_a_problem() -> None:
    doc = load_yaml("? [1, 2]\n: x\nok: 1\n", "t.yaml")
    assert doc.data == {"ok": 1}
    assert [str(p) for p in doc.problems] == ["t.yaml:1: a mapping key must be a plain value"]
